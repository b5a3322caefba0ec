"""The integers the model computes with: the GPU's 32-bit two's complement ``int32``.

(Which values a register or location can take in a program is the explorer's
:mod:`syncverify.explore.value_domain`; this module is only the arithmetic.)

Locks, counters and flags are ``int32`` on the GPU (the kernels' lock dtype, and the run-time
operand ring), and ``add``/``sub``/``atom.add`` wrap modulo 2^32 there. So every value the model
stores, computes or compares goes through :func:`wrap_int32` (``syncverify.model.ptx``, modeling choice
9): a counter that each of two ranks bumps by 2^31 - 1 holds -2, not 4294967294, and a wait for
``>= 4294967294`` compares against the same wrapped target the kernel's int32 operand holds.
"""

from __future__ import annotations

INT32_BITS = 32
INT32_MIN = -(1 << (INT32_BITS - 1))
INT32_MAX = (1 << (INT32_BITS - 1)) - 1


def wrap_int32(value: int) -> int:
    """``value`` modulo 2^32, as a signed 32-bit integer (what an ``.s32`` register holds).

    >>> wrap_int32(2**31 - 1), wrap_int32(2**31), wrap_int32(2 * (2**31 - 1)), wrap_int32(-1)
    (2147483647, -2147483648, -2, -1)
    """
    return (value - INT32_MIN) % (1 << INT32_BITS) + INT32_MIN
