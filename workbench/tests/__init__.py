"""Unit and process tests of the ``klbr`` workbench package.

Run from the repository root: ``python3 -m unittest discover -s workbench/tests -t workbench``.
"""
