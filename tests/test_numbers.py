"""One definition of a number in a CSV cell (trainer_module/numbers.py): finite, within
float32, and read through its column's cell format where the spec names one."""

import pytest

from trainer_module import numbers


@pytest.mark.parametrize("cell, written, value", [
    ("$5,993", "$#,##0", 5993.0),
    ("-$1,200", "$#,##0", -1200.0),
    ("11%", "0%", 0.11),  # as the spreadsheet holds it
    ("1,234.5", "#,##0", 1234.5),
    ("€1,234.50", "€#,##0", 1234.5),
    ("12 €", "0 €", 12.0),
])
def test_a_formatted_cell_names_its_format_and_reads_as_its_number(cell, written, value):
    fmt = numbers.format_of(cell)
    assert str(fmt) == written and numbers.parse_format(written) == fmt
    assert numbers.parse(cell, fmt) == pytest.approx(value)


@pytest.mark.parametrize("cell", ["5993", "abc", "1,23", "($5)", "12.5.1", ""])
def test_plain_numbers_and_text_have_no_format(cell):
    assert numbers.format_of(cell) is None


def test_a_cell_that_breaks_its_columns_format_is_refused():
    fmt = numbers.parse_format("$#,##0")
    assert numbers.parse("$5", fmt) == 5.0
    for cell in ("5", "USD 5", "5%"):
        with pytest.raises(ValueError, match="is not written as the column's format"):
            numbers.parse(cell, fmt)
    with pytest.raises(ValueError, match="is not a number format"):
        numbers.parse_format("0")


@pytest.mark.parametrize("cell, reason", [
    ("inf", "not a finite number"), ("-Infinity", "not a finite number"),
    ("1e39", "beyond the largest number"),
])
def test_infinite_and_float32_overflowing_cells_are_no_numbers(cell, reason):
    with pytest.raises(ValueError, match=reason):
        numbers.parse(cell)


def test_float32s_largest_value_written_in_decimal_is_a_number():
    assert numbers.parse("3.4028235e38") == 3.4028235e38
