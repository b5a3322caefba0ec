"""Exit codes of every ``syncverify`` command (ruff's convention, plus one for UNKNOWN)."""

OK = 0  #: clean: safe, all litmus conditions validated, no bad tiles
FOUND = 1  #: violations / failed validations / bad tiles found
INPUT_ERROR = 2  #: bad input or usage: one line on stderr says what
UNKNOWN = 3  #: a bound (executions, time, steps) was hit before an answer
