"""app.errors: the one function that turns an exception into its one line, and the error lines built on it."""

from __future__ import annotations

from pathlib import Path

from app.errors import ImageError, error_line, one_line, unexpected_error_line


def test_one_line_joins_the_lines_and_caps_the_length():
    assert one_line(ValueError("first\n  second\tthird")) == "first second third"
    assert one_line(ValueError("x" * 500)) == "x" * 200
    assert one_line(ValueError("x" * 500), most=300) == "x" * 300


def test_one_line_says_the_type_where_the_message_says_nothing():
    assert one_line(KeyError()) == "KeyError"
    assert one_line(ValueError("  \n ")) == "ValueError"


def test_typed_names_an_unplanned_error_and_leaves_a_seglens_error_as_it_is():
    assert one_line(KeyError("shape"), typed=True) == "KeyError: 'shape'"
    assert one_line(RuntimeError(), typed=True) == "RuntimeError"
    assert one_line(ImageError("a.png: not an image"), typed=True) == "a.png: not an image"


def test_the_error_lines_name_the_file_once():
    assert error_line(Path("a.png"), ImageError("a.png: not an image")) == "a.png: not an image"
    assert error_line(Path("a.png"), ImageError("truncated")) == "a.png: truncated"
    assert unexpected_error_line(Path("a.png"), OSError(5, "Input/output error")) \
        == "a.png: unexpected error (OSError: [Errno 5] Input/output error)"
    long = unexpected_error_line("b.onnx", ValueError("y" * 400))
    assert long == f"b.onnx: unexpected error (ValueError: {'y' * 300})"


def test_first_keeps_the_first_line_where_a_library_puts_what_went_wrong():
    detail = RuntimeError("[ONNXRuntimeError] : 2 : INVALID_ARGUMENT : bad input\n  at  frame 1\n  at frame 2")
    assert one_line(detail, first=True) == "[ONNXRuntimeError] : 2 : INVALID_ARGUMENT : bad input"
    assert one_line(OSError("\n  truncated   data \nmore"), first=True) == "truncated data"
    assert one_line(OSError("  "), first=True) == "OSError"
