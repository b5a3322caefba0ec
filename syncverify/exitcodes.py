"""Exit codes of every ``syncverify`` command (ruff's convention, plus one for UNKNOWN)."""

OK = 0  #: clean: safe, all litmus conditions validated, no bad tiles
FOUND = 1  #: violations / failed validations / bad tiles found
INPUT_ERROR = 2  #: bad input or usage: one line on stderr says what
UNKNOWN = 3  #: a bound (executions, time, steps) was hit before an answer

#: From least to most severe: a batch (several litmus files) exits with its most severe code.
SEVERITY = (OK, FOUND, UNKNOWN, INPUT_ERROR)


def worst(codes: "list[int] | tuple[int, ...]") -> int:
    """The most severe of ``codes`` (:data:`SEVERITY`); OK for none.

    >>> worst([OK, UNKNOWN, OK]), worst([UNKNOWN, INPUT_ERROR]), worst([])
    (3, 2, 0)
    """
    return max(codes, key=SEVERITY.index, default=OK)
