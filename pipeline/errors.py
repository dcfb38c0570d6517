"""The error every setting check raises: the runners turn it into exit code 2."""


class ConfigError(ValueError):
    """A setting, the dataset spec or the data is missing or outside its expected form."""
