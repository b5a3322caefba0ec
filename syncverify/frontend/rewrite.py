"""Delays, loop bounds and progress in the user's ``@triton.jit`` kernels, without touching their files.

The harness launches the user's kernels; :func:`rewrite_kernel` reads each one's Python source,
rewrites its AST and compiles the result as a new ``JITFunction`` under the kernel's own name, with
the kernel's globals (its helpers, ``tl``, ``iris``) plus the device helpers of
``syncverify.kernels.user_delays``. The user's file is only read.

What the rewrite inserts, each piece behind a ``tl.constexpr`` switch appended to the signature
(``SV_DELAYS``, ``SV_BOUND``, ``SV_MIRROR``), so with all three off the rewritten kernel is the
original statement for statement (:func:`strip_inserted`; ``tests/test_user_stress.py`` compares
the ASTs, and the compiled PTX). ``SV_DELAYS`` is a bit mask of the delay sites compiled in (bit
``site``; -1: every site, random delays; a guided run: only the sites its schedule delays, so the
rest of the kernel runs as written between them: each site's table read and clock check take
microseconds, which between a data store and its flag would give the data a head start):

* **sites**: a statement that synchronizes (an atomic, a volatile ``.cv`` load, a flag store,
  ``tl.debug_barrier()``, inline asm with a fence, barrier, atomic or acquire/release, or a call
  of a ``@triton.jit`` helper that does one of these, such as ``iris.atomic_add``), and every
  store of data. A delay before and after each synchronizing statement, at program start, and
  before each data store, where the stored value is *held* per warp (the warps that store late
  are the ones a missing CTA barrier lets run behind: ``syncverify.kernels.delays.wait_tile``);
* **bounds**: every ``while`` loop gets an iteration cap read from the control block; a wait
  that reaches it leaves its loop, counts a hang and records its site, its last polled value
  and its program (``sv_capped``), so a hang is a report, not a hung process;
* **progress**: program start and end, and the value each wait polls (every few thousand polls),
  mirrored to host memory.

Refused, with ``file:line`` (:class:`RewriteError`, exit 2): a kernel whose source cannot be read
(an autotuner or other wrapper), a ``while ... else``, a nested function, inline asm whose text is
not built from string constants and names (its meaning cannot be read).
"""

from __future__ import annotations

import ast
import copy
import inspect
import itertools
import linecache
import textwrap
import types
from dataclasses import dataclass, field
from typing import Any

from syncverify.errors import SyncVerifyError

#: The arguments the rewrite appends to the kernel's signature (runtime first, constexpr last).
RUNTIME_ARGS = ("sv_ctl", "sv_table", "sv_mirror", "sv_rank", "sv_slot")
CONSTEXPR_ARGS = ("SV_DELAYS", "SV_BOUND", "SV_MIRROR", "SV_WARPS", "SV_WORLD", "SV_INTERPRET")
ADDED_ARGS = RUNTIME_ARGS + CONSTEXPR_ARGS
#: Where the control block holds the poll cap (``syncverify.kernels.user_delays.CTL_INDEX["cap"]``;
#: a test keeps the two equal: this module imports no triton).
CAP_INDEX = 5
#: A bounded wait mirrors the value it polls after its first poll, then every this many polls.
MIRROR_EVERY = 4096

#: Words of inline asm that synchronize, and the site kind each makes.
_ASM_KINDS = (("fence", "fence"), ("membar", "fence"), ("bar.", "barrier"), ("barrier", "barrier"),
              ("atom", "atomic"), ("red.", "atomic"), ("acquire", "acquire-load"), ("release", "flag-store"),
              ("volatile", "volatile-load"))
#: Site kinds that synchronize (a data ``store`` is a site too, for its per-warp hold, but not one of these).
SYNC_KINDS = frozenset({"atomic", "volatile-load", "acquire-load", "flag-store", "barrier", "fence", "asm"})


class RewriteError(SyncVerifyError):
    """A kernel the rewrite cannot instrument as written (one line, with ``file:line``)."""


@dataclass(frozen=True)
class Site:
    """One delay point of a rewritten kernel: ``id`` is the ``SITE`` constexpr the kernel passes."""

    id: int
    kernel: str
    file: str
    line: int
    where: str  # "start", "before", "after", "hold" (a data store's value, per warp), "wait" (a bounded loop),
    # "touch" (the data reads after a wait, made before it: a guided schedule's planned action)
    kind: str  # what is at the line: "program", "atomic", "store", "barrier", "fence", "wait", ...
    text: str  # the source line

    def describe(self) -> str:
        return f"{self.where} {self.kind} at {self.file}:{self.line} ({self.kernel}: {self.text})"

    def to_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass
class RewrittenKernel:
    """A user's kernel and its rewrite: the new ``JITFunction``, its source and its sites."""

    name: str
    original: Any  # the user's JITFunction
    kernel: Any  # the rewritten DualJITFunction
    source: str
    tree: ast.FunctionDef
    original_tree: ast.FunctionDef
    file: str
    sites: list[Site] = field(default_factory=list)


# ----- reading what a call does ----------------------------------------------------------------

def _attr_chain(node: ast.AST) -> list[str] | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return parts[::-1]
    return None


def _resolve(chain: list[str], scope: dict) -> Any:
    """The object ``a.b.c`` names in ``scope`` (a function's globals), or None."""
    obj = scope.get(chain[0], None)
    for part in chain[1:]:
        if obj is None:
            return None
        obj = getattr(obj, part, None)
    return obj


def _is_language(obj: Any) -> bool:
    return isinstance(obj, types.ModuleType) and obj.__name__ in ("triton.language", "triton.language.core")


def _keyword(call: ast.Call, name: str) -> ast.AST | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _constant_strings(node: ast.AST, scope: dict) -> list[str] | None:
    """The string pieces of an asm text expression; None when a piece is neither a constant nor a name."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.Name):
        return [str(scope.get(node.id, node.id))]  # a constexpr parameter (SCOPE) or a global string
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _constant_strings(node.left, scope), _constant_strings(node.right, scope)
        return None if left is None or right is None else left + right
    if isinstance(node, ast.JoinedStr):
        return [v.value for v in node.values if isinstance(v, ast.Constant)]
    return None


class _Analyzer:
    """What each call of a kernel does: the site kinds of ``tl`` primitives and, through
    ``@triton.jit`` helpers (recursively, from their own source), of the helpers' bodies."""

    def __init__(self) -> None:
        self._helpers: dict[int, frozenset[str]] = {}

    def call_kinds(self, call: ast.Call, scope: dict, file: str) -> frozenset[str]:
        chain = _attr_chain(call.func)
        if chain is None:
            return frozenset()
        if len(chain) >= 2 and (_is_language(_resolve(chain[:-1], scope)) or chain[:-1] == ["tl"]):
            return self._language_kinds(chain[-1], call, scope, file)
        target = _resolve(chain, scope)
        if isinstance(getattr(target, "fn", None), types.FunctionType):
            return self.helper_kinds(target)
        return frozenset()

    def _language_kinds(self, name: str, call: ast.Call, scope: dict, file: str) -> frozenset[str]:
        if name.startswith("atomic_"):
            return frozenset({"atomic"})
        if name == "debug_barrier":
            return frozenset({"barrier"})
        if name == "load":
            volatile = _keyword(call, "volatile")
            cache = _keyword(call, "cache_modifier")
            if (isinstance(volatile, ast.Constant) and volatile.value) or (
                    isinstance(cache, ast.Constant) and cache.value == ".cv"):
                return frozenset({"volatile-load"})
            return frozenset()
        if name == "store":
            cache = _keyword(call, "cache_modifier")
            value = call.args[1] if len(call.args) > 1 else _keyword(call, "value")
            if isinstance(value, ast.Constant) or (isinstance(cache, ast.Constant) and cache.value in (".wt", ".cv")
                                                   and isinstance(value, ast.Constant)):
                return frozenset({"flag-store"})
            return frozenset({"store"})
        if name == "inline_asm_elementwise":
            text = call.args[0] if call.args else _keyword(call, "asm")
            pieces = _constant_strings(text, scope) if text is not None else None
            if pieces is None:
                raise RewriteError(f"inline asm whose text is not built from constants at {file}:{call.lineno}: "
                                   "the rewrite cannot tell whether it synchronizes")
            asm = "".join(pieces)
            kinds = {kind for word, kind in _ASM_KINDS if word in asm}
            return frozenset(kinds)
        return frozenset()

    def helper_kinds(self, helper: Any) -> frozenset[str]:
        """The site kinds anywhere in a ``@triton.jit`` helper (its own source, recursively)."""
        key = id(helper)
        if key in self._helpers:
            return self._helpers[key]
        self._helpers[key] = frozenset()  # a recursive helper: what is found so far
        fn = helper.fn
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
        except (OSError, TypeError):
            return frozenset()
        kinds: set[str] = set()
        file = inspect.getsourcefile(fn) or "?"
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                kinds |= self.call_kinds(node, fn.__globals__, file)
        self._helpers[key] = frozenset(kinds)
        return self._helpers[key]


def statement_kinds(node: ast.AST, analyzer: _Analyzer, scope: dict, file: str) -> frozenset[str]:
    """Every site kind of the calls in one statement's own expressions (not its nested blocks)."""
    kinds: set[str] = set()
    for expr in _own_expressions(node):
        for sub in ast.walk(expr):
            if isinstance(sub, ast.Call):
                kinds |= analyzer.call_kinds(sub, scope, file)
    return frozenset(kinds)


def _own_expressions(node: ast.AST) -> list[ast.AST]:
    if isinstance(node, (ast.If, ast.While)):
        return [node.test]
    if isinstance(node, ast.For):
        return [node.iter]
    if isinstance(node, (ast.Expr, ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Return)):
        return [node.value] if node.value is not None else []
    return []


# ----- the transformer ---------------------------------------------------------------------------

def _gate(switch: str, body: list[ast.stmt], orelse: list[ast.stmt] | None = None) -> ast.If:
    return ast.If(test=ast.Name(switch, ast.Load()), body=body, orelse=orelse or [])


def _site_gate(site: int, body: list[ast.stmt], orelse: list[ast.stmt] | None = None) -> ast.If:
    """``if (SV_DELAYS >> site) & 1:``: a delay site compiled in only where the launch enables it
    (``SV_DELAYS``, a constexpr bit mask: -1 every site, 0 none; a guided run enables the sites its
    schedule delays, so the others add no instruction between the user's own)."""
    bit = ast.BinOp(ast.BinOp(ast.Name("SV_DELAYS", ast.Load()), ast.RShift(), _const(site)), ast.BitAnd(), _const(1))
    return ast.If(test=bit, body=body, orelse=orelse or [])


def _call(name: str, *args: ast.expr) -> ast.Call:
    return ast.Call(func=ast.Name(name, ast.Load()), args=list(args), keywords=[])


def _names(*names: str) -> list[ast.expr]:
    return [ast.Name(n, ast.Load()) for n in names]


def _const(value: Any) -> ast.Constant:
    return ast.Constant(value)


class _Rewriter:
    def __init__(self, name: str, file: str, first_line: int, lines: list[str], scope: dict,
                 analyzer: _Analyzer, next_id: itertools.count) -> None:
        self.name, self.file, self.first_line, self.lines = name, file, first_line, lines
        self.scope, self.analyzer, self.next_id = scope, analyzer, next_id
        self.sites: list[Site] = []
        self.loops = 0

    def site(self, node: ast.AST, where: str, kind: str) -> int:
        line = self.first_line + node.lineno - 1
        text = self.lines[node.lineno - 1].strip() if node.lineno - 1 < len(self.lines) else ""
        site = Site(next(self.next_id), self.name, self.file, line, where, kind, text)
        self.sites.append(site)
        return site.id

    def where(self, node: ast.AST) -> str:
        return f"{self.file}:{self.first_line + node.lineno - 1}"

    # the helpers' calls, as the rewritten kernel spells them
    def delay(self, site: int) -> ast.stmt:
        return ast.Expr(_call("sv_delay", *_names("sv_ctl", "sv_table"), _const(site),
                              *_names("sv_rank", "SV_WARPS", "SV_WORLD", "SV_INTERPRET")))

    def delay_at(self, site: int) -> ast.If:
        """The delay of ``site``, behind its bit of ``SV_DELAYS``."""
        return _site_gate(site, [self.delay(site)])

    def progress(self, site: int, state: int) -> ast.stmt:
        return ast.Expr(_call("sv_progress", *_names("sv_ctl", "sv_mirror", "sv_slot"), _const(site), _const(state)))

    def body(self, stmts: list[ast.stmt]) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for i, stmt in enumerate(stmts):
            if isinstance(stmt, ast.While):
                out.extend(self.loop(stmt, self.touches(stmt, stmts[i + 1:])))
            else:
                out.extend(self.statement(stmt))
        return out

    def touches(self, loop: ast.While, rest: list[ast.stmt]) -> list[ast.expr]:
        """The data reads after a wait (``rest``: the statements after it in its block, and their
        blocks) whose address is already known before it: each as a read the program can make
        before the wait (a *touch*, ``syncverify.frontend.schedule``). A read whose address or
        mask uses a name the wait or a later statement assigns is left out."""
        later = {n.id for stmt in [loop, *rest] for n in ast.walk(stmt)
                 if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        found: dict[str, ast.expr] = {}
        for stmt in rest:
            for node in ast.walk(stmt):
                read = self.read_of(node) if isinstance(node, ast.Call) else None
                if read is None or any(isinstance(n, ast.Name) and n.id in later for n in ast.walk(read)):
                    continue
                found.setdefault(ast.unparse(read), read)
        return list(found.values())

    def read_of(self, call: ast.Call) -> ast.expr | None:
        """A plain data read that ``call`` makes, as a call that reads the same memory the same way
        and nothing else: ``tl.load`` (not volatile, not ``.cv``) and ``iris.load`` as written,
        ``iris.put``'s local load, ``iris.get``'s remote one; None for anything else."""
        chain = _attr_chain(call.func)
        if not chain or len(chain) < 2:
            return None
        owner = _resolve(chain[:-1], self.scope)
        name = chain[-1]
        if (_is_language(owner) or chain[:-1] == ["tl"]) and name == "load":
            return None if self.analyzer.call_kinds(call, self.scope, self.file) else copy.deepcopy(call)
        if not (isinstance(owner, types.ModuleType) and owner.__name__.rsplit(".", 1)[-1] == "iris"):
            return None
        arg = _Arguments(call)
        if name == "load":  # load(pointer, to_rank, from_rank, heap_bases, mask, other, cache_modifier, volatile)
            volatile, cache = arg.get(7, "volatile"), arg.get(6, "cache_modifier")
            plain = (volatile is None or isinstance(volatile, ast.Constant) and not volatile.value) and (
                cache is None or isinstance(cache, ast.Constant) and cache.value != ".cv")
            return copy.deepcopy(call) if plain else None
        if name == "put":  # put(from_ptr, to_ptr, from_rank, to_rank, heap_bases, mask, other, load_cache_modifier)
            return _keyword_call(["tl", "load"], [arg.get(0, "from_ptr")],
                                 mask=arg.get(5, "mask"), other=arg.get(6, "other"),
                                 cache_modifier=arg.get(7, "load_cache_modifier"))
        if name == "get":  # get(from_ptr, to_ptr, from_rank, to_rank, heap_bases, mask, other, load_cache_modifier)
            return _keyword_call([*chain[:-1], "load"], [arg.get(0, "from_ptr"), arg.get(3, "to_rank"),
                                                         arg.get(2, "from_rank"), arg.get(4, "heap_bases")],
                                 mask=arg.get(5, "mask"), other=arg.get(6, "other"),
                                 cache_modifier=arg.get(7, "load_cache_modifier"))
        return None

    def statement(self, stmt: ast.stmt) -> list[ast.stmt]:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            raise RewriteError(f"a nested definition at {self.where(stmt)}: the rewrite instruments kernels whose "
                               "helpers are @triton.jit functions")
        if isinstance(stmt, ast.While):
            return self.loop(stmt, [])
        if isinstance(stmt, ast.Return):
            return [_gate("SV_MIRROR", [self.progress(self.end_site, 2)]), stmt]
        kinds = statement_kinds(stmt, self.analyzer, self.scope, self.file)
        if isinstance(stmt, ast.If):
            stmt.body, stmt.orelse = self.body(stmt.body), self.body(stmt.orelse)
        elif isinstance(stmt, ast.For):
            if stmt.orelse:
                raise RewriteError(f"a for ... else at {self.where(stmt)}: Triton has none")
            stmt.body = self.body(stmt.body)
        elif isinstance(stmt, (ast.With, ast.Try)):
            raise RewriteError(f"a {type(stmt).__name__.lower()} block at {self.where(stmt)}: not a Triton construct")
        sync = kinds & SYNC_KINDS
        if isinstance(stmt, (ast.If, ast.For)):
            if not sync:
                return [stmt]
            kind = "/".join(sorted(sync))
            return [self.delay_at(self.site(stmt, "before", kind)), stmt]
        out: list[ast.stmt] = []
        if sync:
            kind = "/".join(sorted(sync))
            out.append(self.delay_at(self.site(stmt, "before", kind)))
            out.append(stmt)
            out.append(self.delay_at(self.site(stmt, "after", kind)))
            return out
        if "store" in kinds:
            held = self.hold(stmt)
            if held is not None:
                return [held]
            return [self.delay_at(self.site(stmt, "before", "store")), stmt]
        return [stmt]

    def hold(self, stmt: ast.stmt) -> ast.stmt | None:
        """``tl.store(p, v, ...)`` / ``iris.store(p, v, ...)`` as a statement: the same store with
        ``v`` held per warp (behind ``SV_DELAYS``, the original statement otherwise)."""
        if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
            return None
        call = stmt.value
        chain = _attr_chain(call.func)
        if not chain or chain[-1] != "store" or len(call.args) < 2 or isinstance(call.args[1], ast.Constant):
            return None
        site = self.site(stmt, "hold", "store")
        held = ast.Call(func=call.func, args=[call.args[0], _call(
            "sv_hold", call.args[1], *_names("sv_ctl", "sv_table"), _const(site),
            *_names("sv_rank", "SV_WARPS", "SV_WORLD", "SV_INTERPRET")), *call.args[2:]], keywords=call.keywords)
        return _site_gate(site, [ast.Expr(held)], [stmt])

    def loop(self, loop: ast.While, touches: list[ast.expr]) -> list[ast.stmt]:
        if loop.orelse:
            raise RewriteError(f"a while ... else at {self.where(loop)}: the rewrite cannot bound it")
        original = ast.While(test=loop.test, body=loop.body, orelse=[])
        kinds = statement_kinds(loop, self.analyzer, self.scope, self.file) & SYNC_KINDS
        kind = "wait" + (f" ({'/'.join(sorted(kinds))})" if kinds else "")
        # the bounded copy is rewritten; the original (SV_BOUND off) stays as written
        inner = self.body(_copy(loop.body))
        k = self.loops
        self.loops += 1
        n, go, seen, cap = f"sv_n{k}", f"sv_go{k}", f"sv_seen{k}", f"sv_cap{k}"
        wait = self.site(loop, "wait", kind)
        test = loop.test
        polled: ast.expr
        if isinstance(test, ast.Compare) and len(test.ops) == 1:
            evaluate = [ast.Assign([ast.Name(seen, ast.Store())], test.left),
                        ast.Assign([ast.Name(go, ast.Store())],
                                   ast.Compare(ast.Name(seen, ast.Load()), test.ops, test.comparators))]
            polled = ast.Name(seen, ast.Load())
        else:
            evaluate = [ast.Assign([ast.Name(go, ast.Store())], test)]
            polled = ast.BinOp(ast.Name(n, ast.Load()), ast.Mult(), _const(0))
        load_cap = ast.parse(f"{cap} = tl.load(sv_ctl + {CAP_INDEX})").body[0]
        bounded_test = ast.BinOp(ast.Name(go, ast.Load()), ast.BitAnd(),
                                 ast.Compare(ast.Name(n, ast.Load()), [ast.Lt()], [ast.Name(cap, ast.Load())]))
        mirror_every = _gate("SV_MIRROR", [ast.If(
            # after the first poll, then every 4096: a wait shows in the mirror as soon as it polls
            test=ast.Compare(ast.BinOp(ast.Name(n, ast.Load()), ast.Mod(), _const(MIRROR_EVERY)), [ast.Eq()],
                             [_const(1)]),
            body=[ast.Expr(_call("sv_polled", *_names("sv_ctl", "sv_mirror", "sv_slot"), _const(wait), polled,
                                 ast.Name(n, ast.Load())))], orelse=[])])
        count = ast.AugAssign(ast.Name(n, ast.Store()), ast.Add(), _const(1))
        touching: list[ast.stmt] = []
        if kinds and touches:
            # a guided touch: the reads after the wait, made once before it, their values unused
            touch = self.site(loop, "touch", kind)
            touching = [_site_gate(touch, [ast.If(
                test=_call("sv_touching", *_names("sv_ctl", "sv_table"), _const(touch),
                           *_names("sv_rank", "SV_WARPS", "SV_WORLD")),
                body=[ast.Expr(_call("sv_keep", read, *_names("sv_ctl", "SV_INTERPRET"))) for read in touches],
                orelse=[])])]
        bounded = [load_cap, ast.Assign([ast.Name(n, ast.Store())], _const(0)), *evaluate,
                   ast.While(test=bounded_test, body=[*inner, count, mirror_every,
                                                      *_copy(evaluate)], orelse=[]),
                   ast.If(test=ast.Compare(ast.Name(n, ast.Load()), [ast.GtE()], [ast.Name(cap, ast.Load())]),
                          body=[ast.Expr(_call("sv_capped", *_names("sv_ctl", "sv_mirror", "sv_slot"), _const(wait),
                                               polled, ast.Name(n, ast.Load()), ast.Name("SV_MIRROR", ast.Load())))],
                          orelse=[])]
        out: list[ast.stmt] = [*touching]
        if kinds:
            out.append(self.delay_at(self.site(loop, "before", kind)))
        out.append(_gate("SV_BOUND", bounded, [original]))
        if kinds:
            out.append(self.delay_at(self.site(loop, "after", kind)))
        return out

    def function(self, fn: ast.FunctionDef) -> ast.FunctionDef:
        docstring = []
        body = fn.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str):
            docstring, body = [body[0]], body[1:]
        start = self.site(fn, "start", "program")
        self.end_site = self.site(fn, "end", "program")
        head = [_gate("SV_MIRROR", [self.progress(start, 1)]), self.delay_at(start)]
        new_body = docstring + head + self.body(body) + [_gate("SV_MIRROR", [self.progress(self.end_site, 2)])]
        args = fn.args
        annotation = ast.Attribute(ast.Name("tl", ast.Load()), "constexpr", ast.Load())
        added = [ast.arg(n) for n in RUNTIME_ARGS] + [ast.arg(n, annotation=annotation) for n in CONSTEXPR_ARGS]
        if args.vararg or args.kwarg or args.kwonlyargs:
            raise RewriteError(f"kernel {fn.name} at {self.file}:{self.first_line} has *args, **kwargs or "
                               "keyword-only parameters: Triton kernels take positional parameters")
        # the added parameters have defaults (None; every launch passes them), so they may follow
        # parameters that have defaults
        new_args = ast.arguments(posonlyargs=list(args.posonlyargs), args=list(args.args) + added, vararg=None,
                                 kwonlyargs=[], kw_defaults=[], kwarg=None,
                                 defaults=list(args.defaults) + [_const(None)] * len(added))
        return ast.FunctionDef(name=fn.name, args=new_args, body=new_body, decorator_list=[], returns=fn.returns,
                               type_params=[])


def _copy(stmts: list[ast.stmt]) -> list[ast.stmt]:
    return copy.deepcopy(stmts)


class _Arguments:
    """A call's arguments by position or keyword (copies; None: not given)."""

    def __init__(self, call: ast.Call) -> None:
        self.call = call

    def get(self, position: int, name: str) -> ast.expr | None:
        if position < len(self.call.args):
            return copy.deepcopy(self.call.args[position])
        found = _keyword(self.call, name)
        return copy.deepcopy(found) if found is not None else None


def _keyword_call(chain: list[str], args: list[ast.expr | None], **keywords: ast.expr | None) -> ast.Call:
    """``a.b.f(*args, k=v, ...)``, leaving out the keywords not given."""
    func: ast.expr = ast.Name(chain[0], ast.Load())
    for part in chain[1:]:
        func = ast.Attribute(func, part, ast.Load())
    return ast.Call(func=func, args=[a for a in args if a is not None],
                    keywords=[ast.keyword(k, v) for k, v in keywords.items() if v is not None])


# ----- building the rewritten kernel -------------------------------------------------------------

_counter = itertools.count()


def kernel_source(kernel: Any) -> tuple[ast.FunctionDef, str, int, list[str]]:
    """``(function AST, file, first line, source lines)`` of a launched kernel, or a RewriteError."""
    fn = getattr(kernel, "fn", None)
    if fn is None or not isinstance(fn, types.FunctionType):
        raise RewriteError(f"{kernel!r} is not a @triton.jit function the rewrite can read (an autotuner or "
                           "another wrapper?): launch the @triton.jit function itself")
    try:
        lines, first = inspect.getsourcelines(fn)
        file = inspect.getsourcefile(fn) or fn.__code__.co_filename
    except (OSError, TypeError) as error:
        raise RewriteError(f"the source of kernel {fn.__name__} cannot be read ({error})") from None
    source = textwrap.dedent("".join(lines))
    tree = ast.parse(source).body[0]
    if not isinstance(tree, ast.FunctionDef):
        raise RewriteError(f"kernel {fn.__name__} at {file}:{first} is not a function definition")
    return tree, file, first, source.splitlines()


def rewrite_kernel(kernel: Any, *, next_id: itertools.count | None = None) -> RewrittenKernel:
    """The rewritten ``JITFunction`` of one launched kernel (module docstring)."""
    # triton: only a stress run rewrites kernels (the model runs without it)
    from syncverify.kernels import user_delays
    from syncverify.kernels._jit import DualJITFunction

    tree, file, first, lines = kernel_source(kernel)
    original_tree = ast.parse(ast.unparse(tree)).body[0]
    fn = kernel.fn
    rewriter = _Rewriter(fn.__name__, file, first, lines, fn.__globals__, _Analyzer(), next_id or itertools.count())
    new = rewriter.function(tree)
    module = ast.Module(body=[new], type_ignores=[])
    ast.fix_missing_locations(module)
    source = ast.unparse(module) + "\n"
    filename = f"<syncverify rewrite of {fn.__name__} from {file}:{first} #{next(_counter)}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    scope = dict(fn.__globals__)
    scope.update({name: getattr(user_delays, name) for name in
                  ("sv_delay", "sv_hold", "sv_progress", "sv_polled", "sv_capped", "sv_touching", "sv_keep")})
    if "tl" not in scope or not _is_language(scope["tl"]):
        scope["tl"] = user_delays.tl
    exec(compile(module, filename, "exec"), scope)  # noqa: S102 -- the user's own kernel, rewritten
    # the rank and the mirror slot change from launch to launch: one compiled kernel for all of them
    rewritten = DualJITFunction(scope[fn.__name__], do_not_specialize=["sv_rank", "sv_slot"])
    return RewrittenKernel(fn.__name__, kernel, rewritten, source, new, original_tree, file, rewriter.sites)


def strip_inserted(tree: ast.FunctionDef) -> ast.FunctionDef:
    """``tree`` with everything the rewrite inserted taken away: every ``if SV_*:`` replaced by its
    ``else`` (the original statement, or nothing) and the added parameters dropped. Equal to the
    original kernel's AST when the rewrite added nothing else (the delay-free test)."""

    def inserted(test: ast.expr) -> bool:  # ``if SV_X:``, or a delay site's ``if (SV_DELAYS >> site) & 1:``
        return any(isinstance(n, ast.Name) and n.id.startswith("SV_") for n in ast.walk(test)) and \
            isinstance(test, (ast.Name, ast.BinOp))

    class Strip(ast.NodeTransformer):
        def visit_If(self, node: ast.If):
            if inserted(node.test):
                return [self.visit(s) for s in node.orelse]
            self.generic_visit(node)
            return node

    stripped = Strip().visit(ast.parse(ast.unparse(tree)).body[0])
    stripped.args.args = [a for a in stripped.args.args if a.arg not in ADDED_ARGS]
    stripped.args.defaults = stripped.args.defaults[:len(stripped.args.defaults) - len(ADDED_ARGS)]
    return stripped


def same_kernel(a: ast.FunctionDef, b: ast.FunctionDef) -> bool:
    """Whether two kernel ASTs are the same code (decorators and docstrings aside)."""
    def body(fn: ast.FunctionDef) -> str:
        fn = ast.parse(ast.unparse(fn)).body[0]
        fn.decorator_list = []
        if fn.body and isinstance(fn.body[0], ast.Expr) and isinstance(fn.body[0].value, ast.Constant):
            fn.body = fn.body[1:]
        return ast.dump(fn)
    return body(a) == body(b)
