"""Issue 25 on one H200: can memory placement or aimed L2 traffic deliver a flag before its data?

The three latent buggy examples (docs/RESULTS.md, "latent") share one witness: a producer stores a
tile, reaches a CTA barrier, then stores a weak flag; the consumer sees the flag and reads the tile
as it was before. No delay reorders that: only the memory system can. ``one_shot_all_reduce``'s
consumer also runs an acquire CAS (sys) between its poll and its read, which empties its SM's L1,
so only a data store still on its way to the point of coherence when the flag arrives can show.
Run 6's L2 congestion (relaxed atomics over 256 MB) made 5 of 9,600 such tiles stale in plain
kernels and none in the examples. This probe measures two ways to make the data's path slower than
the flag's, in plain kernels shaped like the examples (``P`` producer/consumer CTA pairs a launch,
4 warps, a 64 x 64 int32 tile, iteration ``it`` stores ``it``, the consumer counts what is not
``it``):

* **placement**: the tiles in host-mapped pinned memory (unified addressing: the device address
  is the host address; the flags stay in device memory), so the data stores cross PCIe while the
  flag store reaches the GPU's L2 (the classic way a missing ``__threadfence()`` shows);
* **aimed traffic**: a kernel beside the pairs that hammers *the tiles' own lines* in L2 (``hot
  reads``: ``ld.global.cg`` loads, values unused; ``hot +0``: relaxed integer atomic adds of 0,
  which rewrite each word with its own value), so the data stores queue behind it at their L2
  slices while the flag's line is free.

Each buggy shape has a fixed twin (the CTA barrier, a release ``atomic_xchg`` flag, an acquire
fence after the poll) under the same placement and traffic: it must stay at 0, or the action
shows something the protocol forbids.

Raw results: ``$OUT/user_stress_place.json``; the table is printed row by row and again last.
Run from the repository root on the GPU machine (about 60 s; no row starts after ``--budget``)::

    export PYTHONPATH=$PWD PYTHONUNBUFFERED=1; python3 benchmarks/user_stress_place_gpu.py --budget 60
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import triton  # noqa: E402 -- a GPU script: the kernels are defined at import
import triton.language as tl  # noqa: E402

from benchmarks.user_stress_latent_gpu import PartA, error_row, globaltimer, noise, pairs  # noqa: E402
from syncverify.kernels.user_delays import KEEP  # noqa: E402

#: name -> (shape, data placement, traffic beside, what the consumer does between its poll and its read)
#: placement: "device", "host" (the tiles host-mapped, the flags in device memory), "host-all" (tiles and flags
#: host-mapped: what a whole symmetric heap in host memory would be)
#: shape: "weak" (barrier, then a weak .wt flag: the examples) or "fixed" (barrier, release xchg flag; the
#: consumer's acquire fence); traffic: "none", "l2" (run 6's atomics over 256 MB), "hot-read", "hot-add0"
ROWS = {  # device rows first: a host-mapped row that faulted would end this process's later rows
    "weak, device, hot +0, acquire CAS": ("weak", "device", "hot-add0", "acquire-cas"),
    "fixed, device, hot +0": ("fixed", "device", "hot-add0", "acquire-fence"),
    "weak, device, hot reads, acquire CAS": ("weak", "device", "hot-read", "acquire-cas"),
    "fixed, device, hot reads": ("fixed", "device", "hot-read", "acquire-fence"),
    "weak, device, acquire CAS": ("weak", "device", "none", "acquire-cas"),
    "weak, host, acquire CAS": ("weak", "host", "none", "acquire-cas"),
    "fixed, host": ("fixed", "host", "none", "acquire-fence"),
    "weak, host, no acquire": ("weak", "host", "none", "none"),
    "weak, host, hot reads, acquire CAS": ("weak", "host", "hot-read", "acquire-cas"),
    "fixed, host, hot reads": ("fixed", "host", "hot-read", "acquire-fence"),
    "weak, device, L2 atomics, acquire CAS": ("weak", "device", "l2", "acquire-cas"),
    # the tiles host-backed through CUDA's virtual memory management (syncverify.kernels.placement.MixedHeap,
    # what a stress run's placement of one buffer uses), the flags in device memory: as "host" or not?
    "weak, vmm-host, acquire CAS": ("weak", "vmm-host", "none", "acquire-cas"),
    "fixed, vmm-host": ("fixed", "vmm-host", "none", "acquire-fence"),
    # closer to a stress run of the one-shot examples, where this placement showed (almost) nothing:
    # the tiles zeroed on the GPU before each launch (the run's restore), and producers and consumers
    # as two kernels on two streams (the harness's gemm and comm launches)
    "weak, vmm-host, zeroed, acquire CAS": ("weak", "vmm-host", "none", "acquire-cas"),
    "weak, vmm-host, two kernels, acquire CAS": ("weak", "vmm-host", "none", "acquire-cas"),
    "weak, vmm-host, zeroed, two kernels, acquire CAS": ("weak", "vmm-host", "none", "acquire-cas"),
    "weak, vmm-host, two kernels, consumers first, acquire CAS": ("weak", "vmm-host", "none", "acquire-cas"),
    "weak, vmm-host, two kernels, host gap, acquire CAS": ("weak", "vmm-host", "none", "acquire-cas"),
    "fixed, vmm-host, two kernels, host gap": ("fixed", "vmm-host", "none", "acquire-fence"),
    "weak, host-all, acquire CAS": ("weak", "host-all", "none", "acquire-cas"),
    "fixed, host-all": ("fixed", "host-all", "none", "acquire-fence"),
}
#: the latent probe's kernel (``benchmarks/user_stress_latent_gpu.py``), without its touch
BETWEEN = {"none": 0, "acquire-cas": 1, "acquire-fence": 2}


@triton.jit
def hotspot(data, n, ctl, until, ADD: tl.constexpr, BLOCK: tl.constexpr):
    """Traffic on ``data``'s own lines until ``%globaltimer`` passes ``until``: ``ld.global.cg``
    loads (values kept by a store the host's 0 in ``ctl`` masks off), or ADD relaxed atomic adds of
    ``ctl[0]`` (0: each word keeps its value; a run-time 0, so the compiler cannot drop the add)."""
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    zero = tl.load(ctl)
    acc = tl.zeros((BLOCK,), tl.int32)
    k = 0
    while globaltimer() < until:
        base = ((pid + k * 7) % (n // BLOCK)) * BLOCK
        if ADD:
            tl.atomic_add(data + base + offs, zero, sem="relaxed", scope="gpu")
        else:
            acc += tl.load(data + base + offs, cache_modifier=".cg")
        k += 1
    tl.store(ctl + 64 + offs, acc, mask=(zero + offs) < 0)


class HostPointer:
    """A host-mapped buffer as Triton reads a pointer argument (unified addressing: one address)."""

    def __init__(self, tensor) -> None:
        self.tensor, self.dtype = tensor, tensor.dtype

    def data_ptr(self) -> int:
        return self.tensor.data_ptr()


class Probe(PartA):
    """The latent probe's buffers, a larger control block and host-mapped tiles; :meth:`run_row`
    measures one row."""

    def __init__(self, args) -> None:
        args.variant_seconds = args.row_seconds
        super().__init__(args)
        self.ctl = self.torch.zeros(2048, dtype=self.torch.int32, device="cuda")  # [0]: hotspot's 0; KEEP: unused
        assert KEEP.value < 64
        self.host: dict = {}
        self.comm = self.torch.cuda.Stream()

    def pinned(self, like):
        """A host-mapped copy of ``like`` (pinned with cudaHostAlloc: mapped, and with unified addressing
        its device address is its host address), as a kernel argument."""
        key = id(like)
        if key not in self.host:
            self.host[key] = self.torch.empty(like.shape, dtype=like.dtype, pin_memory=True)
            self.host[key].copy_(like.cpu())
        return HostPointer(self.host[key])

    def vmm_host(self, like):
        """A copy of ``like`` in host memory mapped into a reserved device range (``MixedHeap``: one
        rank, one host-backed range), as a CUDA tensor."""
        from syncverify.kernels.placement import MixedHeap, round_up

        key = ("vmm", id(like))
        if key not in self.host:
            nbytes = like.numel() * like.element_size()
            heap = MixedHeap(1, round_up(nbytes, 2 << 20))
            heap.back(0, heap.size, on_host=True)
            view = heap.block[0, :nbytes].view(like.dtype).view(like.shape)
            view.copy_(like)
            self.host[key] = (heap, view)
        return self.host[key][1]

    def buffers(self, place: str) -> tuple:
        """The tiles', the flags' and the ready words' kernel arguments for ``place``."""
        if place == "device":
            return self.data, self.flag, self.ready
        if place == "host":
            return self.pinned(self.data), self.flag, self.ready
        if place == "vmm-host":
            return self.vmm_host(self.data), self.flag, self.ready
        return self.pinned(self.data), self.pinned(self.flag), self.pinned(self.ready)

    def run_row(self, name: str) -> dict:
        torch, args, P = self.torch, self.args, self.args.pairs
        shape, place, traffic, between = ROWS[name]
        data, flag, ready = self.buffers(place)
        if traffic == "l2" and self.noise_buf is None:
            self.noise_buf = torch.zeros(64 << 20, dtype=torch.int32, device="cuda")  # 256 MB: more than L2

        def issue() -> None:
            if traffic != "none":
                until = self.clock_now() + args.traffic_ns
                with torch.cuda.stream(self.side):  # runs beside the pairs, stops at its own deadline
                    if traffic == "l2":
                        noise[(args.traffic_ctas,)](self.noise_buf, self.noise_buf.numel(), until, BLOCK=1024,
                                                    num_warps=4)
                    else:
                        hotspot[(args.traffic_ctas,)](data, P * 64 * 64, self.ctl, until, ADD=traffic == "hot-add0",
                                                      BLOCK=1024, num_warps=4)
            if "zeroed" in name:  # as a stress run's restore: a GPU write of the tiles before the launch
                data.zero_()
            common = dict(TOUCH=0, BETWEEN=BETWEEN[between], FIXED=int(shape == "fixed"), num_warps=4, BM=64, BN=64)
            if "two kernels" in name:  # the producers on this stream, the consumers on another, forked after it
                self.comm.wait_stream(torch.cuda.current_stream())
                first = "consumers first" in name
                if not first:
                    pairs[(P,)](data, flag, ready, self.out, self.ctl, self.it, args.late_ns, P, **common)
                if "host gap" in name:  # the consumers launched while the producers already run (an eager stress run)
                    time.sleep(args.late_ns / 4e9)
                with torch.cuda.stream(self.comm):
                    pairs[(P,)](data, flag, ready, self.out, self.ctl, self.it, args.late_ns, P, FIRST=P, **common)
                if first:
                    pairs[(P,)](data, flag, ready, self.out, self.ctl, self.it, args.late_ns, P, **common)
                torch.cuda.current_stream().wait_stream(self.comm)
            else:
                pairs[(2 * P,)](data, flag, ready, self.out, self.ctl, self.it, args.late_ns, P, **common)

        return {"row": name, "shape": shape, "place": place, "traffic": traffic, "between": between,
                **self.measure(issue, args.row_seconds)}


def cuda_view_check() -> str:
    """Can torch see host-mapped memory as a CUDA tensor (``__cuda_array_interface__``), so that a
    whole symmetric heap could live there with the harness's stream operations unchanged?"""
    import torch

    try:
        host = torch.zeros(1024, dtype=torch.int32, pin_memory=True)

        class View:
            __cuda_array_interface__ = {"shape": (1024,), "typestr": "<i4", "data": (host.data_ptr(), False),
                                        "version": 3, "strides": None}

        view = torch.as_tensor(View(), device="cuda")
        view.fill_(7)
        torch.cuda.synchronize()
        return f"ok ({view.device}, host sees {int(host[5])})" if int(host[5]) == 7 else f"no: host sees {int(host[5])}"
    except Exception as error:  # noqa: BLE001 -- recorded
        return f"no: {type(error).__name__}: {error}"[:200]


def line(r: dict) -> str:
    if "error" in r:
        return f"| {r['row']} | ERROR {r['error'][:90]} | | | |"
    want = "0" if r["shape"] == "fixed" else "> 0"
    return (f"| {r['row']} | {r['stale_tiles']}/{r['pairs']} | {r['stale_elements']} ({r['previous_value_elements']}) "
            f"| {r['capped_polls']} | {want} | {r['seconds']} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=32, help="producer/consumer CTA pairs per launch (default 32)")
    parser.add_argument("--launches", type=int, default=300, help="launches per row (default 300)")
    parser.add_argument("--late-ns", type=int, default=20_000, help="the producers' late start (ns; the "
                        "consumers poll when the flag lands)")
    parser.add_argument("--traffic-ctas", type=int, default=64, help="CTAs of the traffic kernel (default 64)")
    parser.add_argument("--traffic-ns", type=int, default=300_000, help="how long the traffic kernel runs (ns)")
    parser.add_argument("--row-seconds", type=float, default=5.0, help="a row stops after this many seconds")
    parser.add_argument("--rows", default="", help="row names separated by ';' (default: all, in order)")
    parser.add_argument("--budget", type=float, default=60.0, help="seconds: no row starts after this")
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "out")))
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.rows.split(";") if n.strip()] or list(ROWS)
    unknown = [n for n in names if n not in ROWS]
    if unknown:
        print(f"unknown row(s): {', '.join(unknown)} (rows: {', '.join(ROWS)})")
        return 2
    import torch

    if not torch.cuda.is_available():
        print("needs a CUDA GPU (none visible): inline PTX and host-mapped memory have no interpreter path")
        return 2
    started = time.monotonic()
    raw: dict = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                 "triton": triton.__version__, "args": vars(args) | {"out": str(args.out)}, "rows": [],
                 "skipped": []}
    args.out.mkdir(parents=True, exist_ok=True)
    raw["cuda_view"] = cuda_view_check()
    print("host-mapped memory as a CUDA tensor (__cuda_array_interface__):", raw["cuda_view"], flush=True)
    probe = None
    for name in names:
        if time.monotonic() - started > args.budget:
            raw["skipped"].append(name)
            continue
        try:
            probe = probe or Probe(args)
            row = probe.run_row(name)
        except Exception as error:  # noqa: BLE001 -- the other rows still run
            row = error_row("row", name, error)
        raw["rows"].append(row)
        print("ROW", line(row), flush=True)
        (args.out / "user_stress_place.json").write_text(json.dumps(raw, indent=1, default=str))
    print(f"\n{raw['device']}, torch {raw['torch']}, triton {raw['triton']}, {time.monotonic() - started:.0f} s; "
          f"{args.pairs} pairs x <= {args.launches} launches a row, producers {args.late_ns} ns late, traffic "
          f"{args.traffic_ctas} CTAs for {args.traffic_ns} ns" + (f"; skipped: {', '.join(raw['skipped'])}"
                                                                  if raw["skipped"] else ""))
    print("| row | stale tiles | stale elements (previous value) | capped polls | wanted | s |")
    print("| --- | ---: | ---: | ---: | --- | ---: |")
    for r in raw["rows"]:
        print(line(r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
