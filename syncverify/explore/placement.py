"""Per-SM placement: which SM a CTA may sit on, and when a waiting CTA is sure to get one.

A GPU's residency is not one pool of slots. Each SM holds CTAs up to its own limits (threads,
CTA slots, registers, shared memory), and each kernel's CTA takes its own footprint of them, so a
CTA of kernel B fits only on an SM with room for *B's* footprint, whatever total slots are free.
What the hardware guarantees, and what it does not (docs/residency.md has the sources):

* **Fit (documented).** A CTA is placed only where its whole footprint fits beside the CTAs
  already there (CUDA C++ Programming Guide, *Hardware Implementation*: how many blocks "can
  reside ... together on the multiprocessor ... depend[s] on the amount of registers and shared
  memory used by the kernel and the amount of registers and shared memory available"; the limits
  per compute capability in *Technical Specifications*). :func:`occupancy` is that rule for one
  kernel alone (what the CUDA occupancy calculator computes).
* **A free fit is taken (assumed; observed).** A waiting CTA becomes resident once some SM has
  room for its footprint, beside CTAs of any kernel (:func:`sure_room`). No document promises it;
  GPU run 3 on the H200 (docs/RESULTS.md) saw it every time: a one-warp kernel and a 4-warp
  kernel (another compiled function) each took the one free slot on an SM that 15 CTAs of another
  kernel held. Run 1's row that looked otherwise was a kernel's first launch under CUDA lazy
  loading (:mod:`syncverify.explore.residency`), not placement; run 2's other row is open
  (docs/residency.md, run 4).
* **Which SM (unspecified).** No document says which SM with room a CTA goes to. Gilman et al.
  (SIGMETRICS PER 2020, *Demystifying the placement policies of the NVIDIA GPU thread block
  scheduler for concurrent kernels*) measured Pascal to Turing choosing "based on the SM's local
  resource availability", not round robin; run 3 saw the H200 spread one kernel's CTAs over every
  SM (132 CTAs: one per SM; 1,980: 15 per SM). The model takes every choice (``any``): the
  adversarial one for a deadlock search; the GPU script also feeds it the placement it saw.

Two ways to give a footprint: a real :class:`Footprint` (warps, registers per thread, shared
bytes) on a :class:`Machine` (limits per machine kind, :data:`MACHINES`), as the GPU script derives
it from a compiled kernel; or an occupancy (CTAs of that kernel alone per SM), as a small model
states it. Either becomes a cost per resource, each SM's limit being 1 (:class:`Costs`).
Pure Python: nothing here imports torch or triton.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from fractions import Fraction

from syncverify.errors import ScenarioError

#: Which SM a CTA goes to: ``any`` (every SM with room: what is guaranteed, the adversarial choice).
PLACEMENTS: tuple[str, ...] = ("any",)


@dataclass(frozen=True)
class Machine:
    """One machine kind: its SMs and each SM's limits (CUDA C++ Programming Guide, *Technical
    Specifications per Compute Capability*)."""

    name: str
    sms: int
    threads: int  # resident threads per SM
    ctas: int  # resident CTAs per SM
    registers: int  # 32-bit registers per SM
    shared: int  # shared memory per SM usable by CTAs, bytes
    reserved_shared: int  # shared memory the driver reserves per CTA, bytes
    register_unit: int = 256  # registers are allocated per warp in units of this many


#: Machine kinds we run on, keyed as the device tool names them. sm_90: 2,048 threads, 32 CTAs,
#: 64K registers, 228 KB shared memory per SM (227 KB usable by one CTA), 1 KB reserved per CTA.
MACHINES: dict[str, Machine] = {
    "nvidia-h200": Machine("nvidia-h200", sms=132, threads=2048, ctas=32, registers=65536,
                           shared=233472, reserved_shared=1024),
}


@dataclass(frozen=True)
class Footprint:
    """What one CTA of a compiled kernel takes on an SM: its warps, registers per thread and
    static plus dynamic shared memory in bytes (Triton: ``num_warps``, ``n_regs``,
    ``metadata.shared``)."""

    warps: int
    registers: int
    shared: int = 0

    def costs(self, machine: Machine) -> tuple[Fraction, ...]:
        """The fraction of each of ``machine``'s SM limits one CTA takes: threads, CTA slots,
        registers, shared memory."""
        per_warp = -(-self.registers * 32 // machine.register_unit) * machine.register_unit
        return (Fraction(32 * self.warps, machine.threads), Fraction(1, machine.ctas),
                Fraction(per_warp * self.warps, machine.registers),
                Fraction(self.shared + machine.reserved_shared, machine.shared))


def occupancy(footprint: Footprint, machine: Machine) -> int:
    """CTAs of one kernel alone per SM: the smallest of its limits (the occupancy calculator).

    >>> occupancy(Footprint(warps=4, registers=10), MACHINES["nvidia-h200"])  # the thread limit
    16
    """
    return min(int(1 / c) for c in footprint.costs(machine))


@dataclass(frozen=True)
class Costs:
    """Each kernel's cost per SM resource (an SM's limit is 1 for each), and the number of SMs."""

    sms: int
    per_kernel: Mapping[str, tuple[Fraction, ...]]

    @classmethod
    def from_occupancy(cls, sms: int, occupancy: Mapping[str, int], default: int) -> "Costs":
        """SMs holding ``occupancy[k]`` CTAs of kernel ``k`` alone (``default`` for the others):
        one resource, a CTA of ``k`` taking ``1/occupancy[k]`` of it."""
        for kernel, n in [*occupancy.items(), ("every kernel", default)]:
            if not isinstance(n, int) or n < 1:
                raise ScenarioError(f"occupancy {n!r} of {kernel} must be a positive number of CTAs per SM")
        if not isinstance(sms, int) or sms < 1:
            raise ScenarioError(f"sms={sms!r} must be a positive number of SMs")
        return _OccupancyCosts(sms, {k: (Fraction(1, n),) for k, n in occupancy.items()}, Fraction(1, default))

    @classmethod
    def from_footprints(cls, machine: Machine, footprints: Mapping[str, Footprint]) -> "Costs":
        """``machine``'s SMs, each kernel taking its :class:`Footprint`'s share of each limit."""
        return cls(machine.sms, {k: fp.costs(machine) for k, fp in footprints.items()})

    def cost(self, kernel: str) -> tuple[Fraction, ...]:
        """Kernel ``kernel``'s cost per resource (refused when unknown: no silent default)."""
        if kernel not in self.per_kernel:
            raise ScenarioError(f"no footprint for kernel {kernel!r}; known: {', '.join(sorted(self.per_kernel))}")
        return self.per_kernel[kernel]


@dataclass(frozen=True)
class _OccupancyCosts(Costs):
    """:class:`Costs` from occupancies, with one default for kernels not named."""

    default: Fraction = Fraction(1)

    def cost(self, kernel: str) -> tuple[Fraction, ...]:
        return self.per_kernel.get(kernel, (self.default,))


def fits(costs: Costs, sm: Iterable[str], kernel: str) -> bool:
    """Whether a CTA of ``kernel`` fits on an SM holding CTAs of the kernels ``sm`` (one name per
    CTA): every resource summed stays within the SM's limit."""
    total = [Fraction(0)] * len(costs.cost(kernel))
    for k in [*sm, kernel]:
        for i, c in enumerate(costs.cost(k)):
            total[i] += c
    return all(t <= 1 for t in total)


def may_place(costs: Costs, sm: tuple[str, ...], kernel: str) -> bool:
    """Whether the hardware may put a CTA of ``kernel`` on this SM: it fits (beside any kernel)."""
    return fits(costs, sm, kernel)


def sure_room(costs: Costs, sm: tuple[str, ...], kernel: str) -> bool:
    """Whether this SM is sure to take a waiting CTA of ``kernel``: its footprint fits (see the
    module docstring for what that assumes)."""
    return fits(costs, sm, kernel)


def blocked(costs: Costs, sms: Iterable[tuple[str, ...]], kernel: str) -> bool:
    """Whether no SM of ``sms`` (the kernels of the CTAs on each; missing SMs are empty) has room
    for a CTA of ``kernel``: such a CTA waits until a resident CTA exits."""
    sms = list(sms)
    if len(sms) < costs.sms:
        return False  # an empty SM takes anything that fits alone
    return not any(sure_room(costs, sm, kernel) for sm in sms)


def layouts(costs: Costs, kernels: Iterable[str]) -> Iterator[tuple[tuple[str, ...], ...]]:
    """Every way CTAs of ``kernels`` (one name per CTA) can sit on the SMs, each SM's CTAs within
    its limits, up to renaming SMs (they are alike): sorted tuples of sorted tuples, empty SMs
    included.

    >>> list(layouts(Costs.from_occupancy(2, {}, 2), ["a", "a"]))
    [((), ('a', 'a')), (('a',), ('a',))]
    """
    seen: set = set()
    for assignment in itertools.product(range(costs.sms), repeat=len(kernels := list(kernels))):
        sms: list[list[str]] = [[] for _ in range(costs.sms)]
        for kernel, s in zip(kernels, assignment):
            sms[s].append(kernel)
        key = tuple(sorted(tuple(sorted(sm)) for sm in sms))
        if key in seen:
            continue
        seen.add(key)
        if all(fits(costs, sm[:-1], sm[-1]) for sm in (list(k) for k in key) if sm):
            yield key


def can_block(costs: Costs, resident: Iterable[str], kernel: str) -> bool:
    """Whether some placement of the ``resident`` CTAs (their kernels) leaves no SM with room for a
    CTA of ``kernel`` (the adversarial answer when the hardware's choice of SM is unspecified).

    CTAs of one kernel: counted. Each SM must hold at least ``m`` of them, ``m`` the fewest beside
    which ``kernel`` does not fit, so it can iff there are ``sms * m``. Several kernels: every
    placement enumerated (:func:`layouts`; small sizes only).

    >>> costs = Costs.from_occupancy(2, {"b": 1}, 2)   # 2 SMs of 2 slots; a CTA of b takes both
    >>> can_block(costs, ["a", "a"], "b"), can_block(costs, ["a"], "b"), can_block(costs, ["a", "a", "a"], "a")
    (True, False, False)
    """
    resident = list(resident)
    if not fits_all(costs, resident):
        raise ScenarioError(f"{len(resident)} resident CTAs do not fit on {costs.sms} SMs")
    kinds = set(resident)
    if len(kinds) > 1:
        return any(blocked(costs, layout, kernel) for layout in layouts(costs, resident))
    if not resident:
        return False
    (other,) = kinds
    m = next(m for m in range(occupancy_of(costs, other) + 1) if not fits(costs, (other,) * m, kernel))
    return len(resident) >= costs.sms * m


def occupancy_of(costs: Costs, kernel: str) -> int:
    """CTAs of ``kernel`` alone per SM under ``costs``."""
    return min(int(1 / c) for c in costs.cost(kernel))


def fits_all(costs: Costs, kernels: list[str]) -> bool:
    """Whether CTAs of ``kernels`` fit on the SMs together (first fit, largest costs first: exact
    for one resource and for the examples' kernels; a bound otherwise). Running totals per SM keep
    it linear in the CTAs times the SMs (the GPU script asks it for 2,111 CTAs)."""
    totals: list[list[Fraction]] = []
    for k in sorted(kernels, key=lambda k: max(costs.cost(k)), reverse=True):
        cost = costs.cost(k)
        for total in totals:
            if all(t + c <= 1 for t, c in zip(total, cost)):
                total[:] = [t + c for t, c in zip(total, cost)]
                break
        else:
            if len(totals) == costs.sms or any(c > 1 for c in cost):
                return False
            totals.append(list(cost))
    return True
