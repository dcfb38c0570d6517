"""The docs say what the code does: the README's settings table has the code's variables, types
and defaults; docs/architecture.md names every module; every project file the docs name exists;
the README stays a front page."""

import dataclasses
import functools
import glob
import os
import re
import subprocess

import pytest

from pipeline import console, env_settings
from pipeline.pipeline_config import REPO_ROOT, PipelineConfig, configure
from trainer_module.config import CHOICES, SETTINGS, TrainerConfig

README = os.path.join(REPO_ROOT, "README.md")
DOCS = sorted(glob.glob(os.path.join(REPO_ROOT, "docs", "*.md")))
TYPES = {env_settings._env_int: "whole number", env_settings._env_float: "number",
         env_settings._env_bool: "true/false", env_settings._env_steps: "steps `first,last`",
         env_settings._env_str: "text"}


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


@dataclasses.dataclass(frozen=True)
class Row:
    type: str
    default: str


@pytest.fixture(scope="module")
def table() -> dict[str, Row]:
    block = re.search(r"<!-- settings:begin -->\n(.*?)<!-- settings:end -->", _read(README),
                      re.S).group(1)
    rows = {}
    for line in block.splitlines()[2:]:
        variable, kind, default, _ = (cell.strip() for cell in line.strip("|").split(" | "))
        rows[variable.strip("`")] = Row(kind, default)
    return rows


def test_the_table_lists_every_variable_the_runner_reads(table):
    read = {*env_settings.PIPELINE_VARIABLES, *env_settings.TRAINER_VARIABLES,
            console.VERBOSE_ENV}
    assert set(table) == read


def _shown(value) -> str:
    """How the table writes a code default."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str):
        return f"`{value}`" if value else "empty"
    if isinstance(value, tuple):
        return "empty" if not value else ",".join(map(str, value))
    return f"{value:g}" if isinstance(value, float) else str(value)


def test_trainer_settings_have_the_codes_type_and_default(table):
    defaults = TrainerConfig.create()
    for variable, (setting, parse) in env_settings.TRAINER_VARIABLES.items():
        row = table[variable]
        if setting in CHOICES:
            assert row.type == ", ".join(f"`{c}`" for c in CHOICES[setting]), variable
        else:
            assert row.type == TYPES[parse], variable
        default = getattr(getattr(defaults, SETTINGS[setting]), setting)
        assert _shown(default) in row.default, (variable, default, row.default)


def test_pipeline_settings_have_the_codes_type_and_default(table):
    fields = {f.name: f for f in dataclasses.fields(PipelineConfig)}
    variables = env_settings.PIPELINE_VARIABLES

    def parsed_by(parse) -> dict[str, str]:
        return {var: field for var, (field, p) in variables.items() if p is parse}

    for kind, parse in (("whole number", env_settings._env_int),
                        ("number", env_settings._env_float)):
        for variable, field in parsed_by(parse).items():
            assert table[variable].type == kind, variable
            default = fields[field].default
            if default is None:  # the dataset decides: the table says where from, no number
                assert not re.search(r"\d", table[variable].default), variable
            else:
                assert _shown(default) in table[variable].default, variable
    # Names and folders: the defaults as the config resolves them for the default dataset.
    config = configure().validate()
    names = {**parsed_by(env_settings._env_str), **parsed_by(env_settings._env_path)}
    assert set(names) == {"DATASET", "PIPELINE_NAME", "DATA_DIR", "OUTPUT_DIR"}
    for variable, field in names.items():
        shown = table[variable].default.strip("`").replace("<dataset>", config.dataset)
        value = getattr(config, field)
        if os.path.isabs(value):
            value = os.path.relpath(value, REPO_ROOT) + "/"
        assert shown == value, (variable, shown, value)
    assert table[console.VERBOSE_ENV] == Row("true/false", "false")
    for variable, field in parsed_by(env_settings._env_bool).items():
        assert table[variable] == Row("true/false", str(fields[field].default).lower())
    assert not console.verbose({})


def _modules() -> list[str]:
    """The project's modules: tracked by git (not, e.g., the bench's copy of the checkout)."""
    tracked = subprocess.run(["git", "ls-files", "pipeline", "trainer_module", "bench"],
                             cwd=REPO_ROOT, capture_output=True, text=True, check=True).stdout
    return sorted(path for path in tracked.split()
                  if path.endswith(".py") and os.path.basename(path) != "__init__.py")


def test_architecture_names_every_module():
    text = _read(os.path.join(REPO_ROOT, "docs", "architecture.md"))
    missing = [m for m in _modules() if f"`{m}`" not in text]
    assert not missing, missing


def test_the_trainer_page_stays_a_reference():
    """The record of each run lives in docs/experiments/; the page says what is and links it."""
    page = os.path.join(REPO_ROOT, "docs", "trainer-and-tpu.md")
    assert len(_read(page).splitlines()) <= 350


def test_every_project_file_the_docs_name_exists():
    for path in [README, *DOCS]:
        named = set(re.findall(r"\b((?:pipeline|trainer_module|bench|tests|docs)"
                               r"/[\w/.-]*\.(?:py|toml|md|pbtxt))\b", _read(path)))
        missing = sorted(n for n in named if "<" not in n
                         and not os.path.exists(os.path.join(REPO_ROOT, n)))
        assert not missing, (path, missing)


def test_the_readme_is_a_front_page_that_links_every_doc():
    text = _read(README)
    assert len(text.splitlines()) <= 250
    for doc in DOCS:
        assert f"(docs/{os.path.basename(doc)})" in text, doc
    assert {os.path.basename(d) for d in DOCS} >= {
        "dataset-spec.md", "trainer-and-tpu.md", "predictions.md", "cloud.md",
        "troubleshooting.md", "benchmarks.md", "architecture.md"}


@functools.cache
def _anchors(path: str) -> set[str]:
    """The anchors GitHub gives a page's headings: lower case, punctuation dropped, spaces as
    hyphens, a repeated heading numbered from -1."""
    seen: dict[str, int] = {}
    anchors = set()
    in_code = False
    for line in _read(path).splitlines():
        if line.startswith("```"):
            in_code = not in_code
        if in_code or not line.startswith("#"):
            continue
        title = line.lstrip("#").strip().lower()
        slug = "".join(c for c in title if c.isalnum() or c in " -_").replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        anchors.add(f"{slug}-{n}" if n else slug)
    return anchors


def test_every_link_between_the_docs_reaches_its_file_and_heading():
    pages = [README, *sorted(glob.glob(os.path.join(REPO_ROOT, "docs", "**", "*.md"),
                                       recursive=True))]
    broken = []
    for page in pages:
        for target in re.findall(r"\]\(([^)\s]+)\)", _read(page)):
            if re.match(r"[a-z]+:", target):
                continue  # a web address
            file, _, anchor = target.partition("#")
            path = os.path.normpath(os.path.join(os.path.dirname(page), file)) if file else page
            if not os.path.exists(path):
                broken.append((os.path.relpath(page, REPO_ROOT), target))
            elif anchor and path.endswith(".md") and anchor not in _anchors(path):
                broken.append((os.path.relpath(page, REPO_ROOT), target))
    assert not broken, broken
