"""The library device APIs a user's kernel imports (syncverify.frontend.devices): iris's functional
API and PyTorch's symmetric-memory helpers, run in Triton's interpreter on two ranks' heaps with
known answers, compiled for sm_90 to the instructions their docstrings name, and installed as
``import iris`` only for the duration of a check."""

from __future__ import annotations

import doctest
import inspect
import re
import sys
import types
from pathlib import Path

import pytest
import torch
import triton
import triton.language as tl

from syncverify.errors import SyncVerifyError
from syncverify.frontend import devices
from tests.sequential_harness import jit  # first: the shims are then JITFunctions whatever TRITON_INTERPRET says
from syncverify.frontend.devices import iris, libshmem_device, symm_mem
from syncverify.kernels._jit import _interpreted, _interpreting_calls
from syncverify.kernels.compile import compile_like_launch

DOCS = Path(__file__).resolve().parents[1] / "docs" / "kernels.md"


def interpret(kernel, grid, *args, **kwargs) -> None:
    with _interpreting_calls():
        _interpreted(kernel)[grid](*args, **kwargs)


def two_heaps(dtype=torch.int32, n: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
    """Two ranks' heaps (rows) holding 0..2n-1 and their ``heap_bases``."""
    heap = torch.arange(2 * n, dtype=dtype).reshape(2, n)
    return heap, torch.tensor([heap[0].data_ptr(), heap[1].data_ptr()], dtype=torch.int64)


# ----- provided(): `import iris` gives the shim during a check, and only then ------------------

def test_provided_installs_iris_for_the_duration_and_puts_back_what_was_there():
    real = types.ModuleType("iris")  # stands for an installed iris
    sys.modules["iris"] = real
    try:
        with devices.provided() as installed:
            import iris as inside

            assert inside is installed["iris"] is devices.shim("iris")
        assert sys.modules["iris"] is real
        with pytest.raises(RuntimeError), devices.provided():
            raise RuntimeError("a check that fails")
        assert sys.modules["iris"] is real
    finally:
        del sys.modules["iris"]
    with devices.provided():
        assert "iris" in sys.modules
    assert "iris" not in sys.modules  # nothing was installed before: nothing is left


def test_provided_maps_other_names_and_refuses_unknown_apis_and_dotted_names():
    with devices.provided({"my_symm_helpers": "symm_mem"}):
        import my_symm_helpers

        assert my_symm_helpers.symm_mem_sync is symm_mem.symm_mem_sync
    assert "my_symm_helpers" not in sys.modules
    with pytest.raises(SyncVerifyError, match="no device API called 'nvshmem'.*iris, libshmem_device, symm_mem"):
        with devices.provided({"nvshmem": "nvshmem"}):
            pass
    with pytest.raises(SyncVerifyError, match="without dots"):
        with devices.provided({"kraken._ptx_utils": "symm_mem"}):
            pass


def test_a_name_iris_has_but_the_shim_does_not_is_refused_by_name():
    with pytest.raises(AttributeError, match=r"iris\.DeviceContext is not provided .*\(it covers: translate"):
        iris.DeviceContext  # noqa: B018


def test_the_module_docstring_examples_hold():
    result = doctest.testmod(devices, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 3 and result.failed == 0


# ----- iris: signatures as iris's, answers on two heaps ---------------------------------------

#: iris's positional parameters (ROCm/iris iris/mem/triton/ops.py): the rank order differs between
#: load (to_rank, from_rank) and the others (from_rank, to_rank), the classic way to get one wrong.
IRIS_SIGNATURES = {
    "translate": ("ptr", "from_rank", "to_rank", "heap_bases"),
    "load": ("pointer", "to_rank", "from_rank", "heap_bases", "mask", "other", "cache_modifier", "volatile"),
    "store": ("pointer", "value", "from_rank", "to_rank", "heap_bases", "mask"),
    "copy": ("src_ptr", "dst_ptr", "from_rank", "to_rank", "cur_rank", "heap_bases", "mask", "other"),
    "get": ("from_ptr", "to_ptr", "from_rank", "to_rank", "heap_bases", "mask", "other"),
    "put": ("from_ptr", "to_ptr", "from_rank", "to_rank", "heap_bases", "mask", "other"),
    "atomic_cas": ("pointer", "cmp", "val", "from_rank", "to_rank", "heap_bases", "sem", "scope"),
    **{f"atomic_{op}": ("pointer", "val", "from_rank", "to_rank", "heap_bases", "mask", "sem", "scope")
       for op in ("add", "sub", "xchg", "and", "or", "xor", "min", "max")},
}


@pytest.mark.parametrize("name", sorted(IRIS_SIGNATURES))
def test_each_iris_function_takes_iris_parameters_in_iris_order(name):
    params = tuple(inspect.signature(getattr(iris, name).fn).parameters)
    assert params[:len(IRIS_SIGNATURES[name])] == IRIS_SIGNATURES[name]


@jit
def _every_iris_call(x, bases, cur: tl.constexpr, other: tl.constexpr, B: tl.constexpr):
    offs = tl.arange(0, B)
    v = iris.load(x + offs, cur, other, bases, cache_modifier=".cv", volatile=True)   # peer's [0:B]
    iris.store(x + B + offs, v + 1, cur, other, bases, cache_modifier=".wt")          # peer's [B:2B]
    iris.put(x + offs, x + 2 * B + offs, cur, other, bases)                           # mine -> peer's [2B:3B]
    iris.get(x + offs, x + 3 * B + offs, other, cur, bases)                           # peer's -> mine [3B:4B]
    iris.copy(x + offs, x + 5 * B + offs, other, cur, cur, bases)                     # peer's -> mine [5B:6B]
    s = x + 4 * B  # scalars on the peer's heap: [4B + i]
    iris.atomic_add(s, 5, cur, other, bases, sem="release", scope="sys")
    iris.atomic_sub(s + 1, 2, cur, other, bases)
    old = iris.atomic_cas(s + 2, 0, 7, cur, other, bases, sem="acquire", scope="gpu")
    iris.atomic_xchg(s + 3, old + 9, cur, other, bases, sem="relaxed", scope="cta")
    iris.atomic_max(s + 4, 11, cur, other, bases)
    iris.atomic_min(s + 5, -3, cur, other, bases)
    iris.atomic_or(s + 6, 3, cur, other, bases)
    iris.atomic_and(s + 7, 6, cur, other, bases)
    iris.atomic_xor(s + 8, 5, cur, other, bases)
    t = iris.translate(x + offs, cur, other, bases)
    tl.store(iris.translate(t, other, cur, bases) + 6 * B, tl.load(t))               # round trip -> mine [6B:7B]


def test_every_iris_function_reaches_the_right_ranks_copy_with_the_right_value():
    heap, bases = two_heaps()
    heap[:, 16:48] = 0
    heap[1, 23] = 12  # atomic_and: 12 & 6; every other scalar starts at 0
    interpret(_every_iris_call, (1,), heap[0], bases, 0, 1, B=4)
    mine, peer = heap[0], heap[1]
    assert mine[:4].tolist() == [0, 1, 2, 3] and peer[:4].tolist() == [64, 65, 66, 67]   # reads leave both alone
    assert peer[4:8].tolist() == [65, 66, 67, 68]          # store of load + 1
    assert peer[8:12].tolist() == [0, 1, 2, 3]             # put
    assert mine[12:16].tolist() == [64, 65, 66, 67]        # get
    assert mine[20:24].tolist() == [64, 65, 66, 67]        # copy
    assert peer[16:25].tolist() == [5, -2, 7, 9, 11, -3, 3, 4, 5]  # add sub cas xchg max min or and xor
    assert mine[24:28].tolist() == [64, 65, 66, 67]        # translate there and back
    assert mine[16:20].tolist() == [0] * 4 and mine[28:32].tolist() == [0] * 4  # nothing else written


def test_put_refuses_the_copy_engine_by_name():
    @jit
    def with_sdma(x, bases):
        iris.put(x, x, 0, 1, bases, use_copy_engine=True)

    heap, bases = two_heaps()
    with pytest.raises(Exception, match="SDMA"):
        interpret(with_sdma, (1,), heap[0], bases)


# ----- PyTorch symmetric-memory helpers ---------------------------------------------------------

@jit
def _sync_then_write(pads, buffers, rank: tl.constexpr, W: tl.constexpr):
    symm_mem.symm_mem_sync(pads, None, rank, W, hasPreviousMemAccess=True, hasSubsequentMemAccess=True)
    peer = symm_mem.get_remote_ptr(buffers, (rank + 1) % W, tl.int32)
    tl.store(peer + symm_mem.get_flat_bid(), 40 + rank)


def test_symm_mem_sync_signals_every_peer_consumes_its_own_slots_and_peer_pointers_reach_the_peer():
    W = 2
    pads = torch.zeros(W, W, dtype=torch.uint32)
    buffers = torch.zeros(W, 1, dtype=torch.int32)
    table = lambda t: torch.tensor([t[r].data_ptr() for r in range(W)], dtype=torch.int64)  # noqa: E731
    pads[0, 1] = 1  # rank 1 signalled rank 0 already
    interpret(_sync_then_write, (1,), table(pads), table(buffers), 0, W)
    assert pads.tolist() == [[0, 0], [1, 0]]  # rank 0 consumed both its slots; rank 1's slot [0] now set
    assert buffers.tolist() == [[0], [40]]   # the peer pointer from buffer_ptrs reached rank 1


def test_send_and_wait_signal_are_a_cas_spin_on_the_slot():
    @jit
    def send_then_wait(slot):
        symm_mem.send_signal(slot, "release")
        symm_mem.wait_signal(slot, "acquire")
        symm_mem.send_signal(slot + 1, "relaxed")

    slots = torch.zeros(2, dtype=torch.uint32)
    interpret(send_then_wait, (1,), slots)
    assert slots.tolist() == [0, 1]


# ----- the same modules compile for sm_90 to the instructions they promise ---------------------

def _instructions(ptx: str) -> set[str]:
    return set(re.findall(r"\b(?:atom|red|fence|bar|ld\.volatile|st\.global\.wt)[\w.]*", ptx))


def test_the_iris_shim_compiles_for_sm90_to_the_atomics_the_user_wrote():
    heap, bases = two_heaps()
    found = _instructions(compile_like_launch(_every_iris_call, heap[0], bases, 0, 1, 4).asm["ptx"])
    for instruction in ("atom.global.sys.release.add.u32", "atom.global.acquire.gpu.cas.b32",
                        "atom.global.cta.relaxed.exch.b32", "ld.volatile.global", "st.global.wt"):
        assert any(f.startswith(instruction) for f in found), (instruction, sorted(found))


def test_symm_mem_sync_compiles_for_sm90_to_sys_scope_cas_spins_between_cta_barriers():
    pads = torch.zeros(2, 2, dtype=torch.uint32)
    table = torch.zeros(2, dtype=torch.int64)
    found = _instructions(compile_like_launch(_sync_then_write, table, table, 0, 2).asm["ptx"])
    assert {"atom.global.release.sys.cas.b32", "atom.global.acquire.sys.cas.b32", "bar.sync"} <= found, sorted(found)
    del pads


# ----- docs/kernels.md lists every function, and only those -----------------------------------

def test_the_docs_list_every_device_function_and_no_other():
    text = DOCS.read_text()
    for module in (iris, symm_mem, libshmem_device):
        short = module.__name__.rsplit(".", 1)[1]
        listed = set(re.findall(rf"^\| `{short}\.(\w+)`", text, flags=re.M))
        assert listed == set(module.DEVICE_API), (short, sorted(listed ^ set(module.DEVICE_API)))
