"""Paths and arguments as the OS gives them: bytes, which need not be UTF-8.

Python holds such bytes as lone surrogates in a str (os.fsdecode), and the
script gets them as plain Python would give them. The extension takes a
path as that str or as bytes (src/bindings/output_dir_binding.h); a
binding that takes a plain string is given os.fsencode's bytes. Where such
text is shown (an error line, a fact in the report), the bytes are written
as \\xff, as Python's backslashreplace does, never raw."""


def shown(text):
    """TEXT with the bytes that are not UTF-8 written as \\xff: always
    printable and valid UTF-8."""
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a lone surrogate no byte stands for (the script's own text)
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
