"""The syncverify pytest plugin: stress a protocol inside the real kernels from a test.

Installed through the ``pytest11`` entry point (``pyproject.toml``): installing syncverify is
enough. It loads in every pytest session of everyone who installs syncverify, so importing it
imports neither torch nor triton; the fixture imports them when a test calls it.

Fixture ``syncverify_stress``::

    result = syncverify_stress(protocol="my_lock.toml", kernel="all-reduce", world_size=2,
                               iterations=None, seconds=None, delays="random", seed=None,
                               **campaign_options)
    result.assert_clean()

* ``protocol``: a built-in name or a ``.toml`` path (relative paths are looked up beside the test
  file first, then in the current directory).
* ``iterations`` / ``seconds``: the budget; neither: ``--syncverify-seconds`` if given, else the
  campaign's default (1000 iterations; 4 interpreted).
* ``seed``: None takes ``--syncverify-seed`` (default 0: a run is the same every time).
* ``**campaign_options``: any other :class:`syncverify.stress.campaign.CampaignOptions` field
  (``order``, ``reset``, ``poison``, ``push``, ``max_polls``, sizes, ...), and ``interpret``
  (None: ``--syncverify-interpret``; ``True`` runs that test in the interpreter always).
* Ranks run as virtual ranks (every rank on one GPU; the interpreter's only mode) unless the test
  passes ``virtual_ranks=False``.

``harness="my_harness.py::one_call"`` instead of ``protocol``: the user's own ``@triton.jit`` kernels
launched by a harness (``syncverify stress FILE.py``; keywords: ``world_size``, ``calls``,
``iterations``/``seconds``, ``delays`` none/random/guided, ``seed``, ``interpret``, ``defines``, ...);
returns a :class:`syncverify.testing.KernelStressResult` with ``.assert_clean()``.

Precedence: the call's arguments, then ``@pytest.mark.syncverify(...)`` (same keywords; the marker
nearest the test wins), then the command-line options, then the defaults above.

Returns a :class:`syncverify.testing.StressResult`: ``.clean``, ``.counts``, ``.first_failure``,
``.replay_command``, ``.assert_clean()`` (and every ``CampaignResult`` attribute). Interpreted, it
also carries ``.model`` (the model's verdict over the calls the campaign makes, as ``syncverify
stress --interpret`` prints it) and ``.notes`` (what the interpreter cannot show), and
``assert_clean()`` fails unless the model proves the protocol safe: the interpreter runs programs
one at a time, so its clean run is no evidence (see :meth:`StressResult.assert_clean`).

Without a CUDA GPU and without ``--syncverify-interpret`` (or without torch and triton) the test is
skipped, naming what is missing. Bad arguments fail the test with one line naming the argument
(they are checked first, so a typo fails on a CPU-only machine too, rather than skipping).

``syncverify.assert_safe(protocol, ...)``, the model check as an assertion, needs no fixture.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from syncverify.errors import SyncVerifyError

#: The fixture's own keywords and their defaults (None: decided at the call, see above).
DEFAULTS: dict[str, Any] = dict(protocol=None, kernel="all-reduce", world_size=2, iterations=None,
                                seconds=None, delays="random", seed=None, interpret=None,
                                virtual_ranks=True)


@dataclass(frozen=True)
class Settings:
    """The command-line options, kept on ``config.stash``."""

    interpret: bool = False
    seconds: float | None = None
    seed: int | None = None


settings_key = pytest.StashKey[Settings]()


# ----- options and marker ----------------------------------------------------------------------

def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("syncverify", "syncverify stress campaigns (the syncverify_stress fixture)")
    group.addoption("--syncverify-interpret", action="store_true", default=False,
                    help="run syncverify_stress through Triton's CPU interpreter at tiny sizes "
                         "(virtual ranks; no GPU needed) (default: off: a CUDA GPU, else skip)")
    group.addoption("--syncverify-seconds", action="store", default=None, metavar="SECONDS",
                    help="run each syncverify_stress campaign that names neither iterations nor "
                         "seconds for this long (default: the campaign's iterations, 1000; 4 interpreted)")
    group.addoption("--syncverify-seed", action="store", default=None, metavar="SEED",
                    help="seed of syncverify_stress campaigns that give none (default: 0)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "syncverify(protocol=..., kernel=..., world_size=..., iterations=..., seconds=..., "
        "delays=..., seed=..., **campaign_options): defaults of the syncverify_stress fixture in "
        "this test (the fixture call's own arguments win)",
    )
    config.stash[settings_key] = Settings(
        interpret=bool(config.getoption("syncverify_interpret", False)),
        seconds=_positive_seconds(config.getoption("syncverify_seconds", None)),
        seed=_seed(config.getoption("syncverify_seed", None)),
    )


def _positive_seconds(text) -> float | None:
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0:
        raise pytest.UsageError(f"--syncverify-seconds={text} must be a positive number of seconds, e.g. 30")
    return value


def _seed(text) -> int | None:
    if text is None:
        return None
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise pytest.UsageError(f"--syncverify-seed={text} must be a whole number >= 0, e.g. 1")
    return value


# ----- the fixture -----------------------------------------------------------------------------

@pytest.fixture
def syncverify_stress(request: pytest.FixtureRequest):
    """Run a stress campaign of a protocol inside the real kernels; see this module's docstring."""
    marker = _marker_options(request)
    settings = request.config.stash.get(settings_key, Settings())

    def stress(**call: Any):
        if "harness" in call or "harness" in marker:
            return _stress_harness(call, marker, settings, request)
        options = _merge(call, marker, settings)
        options["protocol"] = _protocol_path(options["protocol"], request)
        given = dict(options)
        _fail_on_error(_check, options)
        _skip_unless_runnable(options["interpret"])
        # pytest loads this plugin in every session: the campaign is imported when a test runs one
        from syncverify.stress.campaign import run_campaign
        from syncverify.testing import StressResult, replay_command

        # SyncVerifyError here: a limit of this machine (more ranks than GPUs, ...)
        campaign = _fail_on_error(run_campaign, **options)
        model = notes = None
        if options["interpret"]:  # a clean interpreted run proves nothing: the model must say it
            from syncverify.stress.report import campaign_verdict, interpreter_lines  # deferred: pytest loads this plugin at every start
            model = _fail_on_error(campaign_verdict, dict(campaign.options, protocol=options["protocol"]))
            notes = tuple(interpreter_lines(campaign, model))
        return StressResult(campaign, replay_command(campaign, given), model=model, notes=notes or ())

    stress.__signature__ = inspect.Signature(  # what help() and IDEs show
        [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=DEFAULTS[name])
         for name in ("protocol", "kernel", "world_size", "iterations", "seconds", "delays", "seed")]
        + [inspect.Parameter("campaign_options", inspect.Parameter.VAR_KEYWORD)])
    return stress


def _stress_harness(call: dict, marker: dict, settings: Settings, request: pytest.FixtureRequest):
    """``harness=FILE.py[::NAME]``: the user's own kernels (``syncverify stress FILE.py``); the
    path is looked up beside the test file first."""
    options = dict(marker)
    _budget(options, call)
    harness = str(options.pop("harness"))
    path, sep, name = harness.partition("::")
    beside = Path(request.node.path).parent / path
    if not Path(path).is_absolute() and beside.is_file():
        harness = str(beside) + sep + name
    if options.get("interpret") is None:
        options["interpret"] = settings.interpret
    if options.get("seed") is None:
        options["seed"] = settings.seed if settings.seed is not None else 0
    if options.get("iterations") is None and options.get("seconds") is None and settings.seconds is not None:
        options["seconds"] = settings.seconds
    options = {k: v for k, v in options.items() if v is not None or k in ("iterations", "seconds")}
    _skip_unless_runnable(options["interpret"])
    # pytest loads this plugin in every session: the stress run is imported when a test runs one
    from syncverify.testing import stress_kernel

    return _fail_on_error(stress_kernel, harness, **options)


def _fail_on_error(function, *args, **kwargs):
    """``function(...)``; a :class:`SyncVerifyError` fails the test with its one line."""
    try:
        return function(*args, **kwargs)
    except SyncVerifyError as error:
        message = f"syncverify_stress: {error}"
    pytest.fail(message, pytrace=False)  # outside the except: no chained traceback


def _marker_options(request: pytest.FixtureRequest) -> dict:
    """The keywords of every ``syncverify`` marker on the test, the nearest one winning."""
    merged: dict = {}
    for mark in reversed(list(request.node.iter_markers("syncverify"))):
        if mark.args:
            pytest.fail(f"@pytest.mark.syncverify takes keyword arguments only (protocol=..., "
                        f"kernel=...); got {mark.args!r}", pytrace=False)
        _budget(merged, mark.kwargs)
    return merged


def _budget(into: dict, layer: dict) -> None:
    """Lay ``layer`` over ``into``; iterations and seconds are one budget: a layer that names one
    replaces both."""
    if "iterations" in layer or "seconds" in layer:
        into.pop("iterations", None)
        into.pop("seconds", None)
    into.update(layer)


def _merge(call: dict, marker: dict, settings: Settings) -> dict:
    options = dict(marker)
    _budget(options, call)
    if options.get("iterations") is None and options.get("seconds") is None:
        options["seconds"] = settings.seconds
    elif options.get("iterations") is not None and options.get("seconds") is not None:
        pytest.fail(f"syncverify_stress: give iterations= or seconds=, not both "
                    f"(iterations={options['iterations']}, seconds={options['seconds']})", pytrace=False)
    for name, value in DEFAULTS.items():
        if options.get(name) is None:
            options[name] = value
    if options["seed"] is None:
        options["seed"] = settings.seed if settings.seed is not None else 0
    if options["interpret"] is None:
        options["interpret"] = settings.interpret
    if options["protocol"] is None:
        pytest.fail("syncverify_stress: protocol= is required (a built-in name such as 'epoch-flag' "
                    "or a .toml path), in the call or in @pytest.mark.syncverify", pytrace=False)
    return options


def _protocol_path(protocol, request: pytest.FixtureRequest):
    """A relative ``.toml`` path beside the test file, if there is one there."""
    if isinstance(protocol, (str, Path)) and str(protocol).endswith(".toml") and not Path(protocol).is_absolute():
        beside = Path(request.node.path).parent / protocol
        if beside.is_file():
            return str(beside)
    return protocol


def _check(options: dict) -> None:
    """The fixture's own arguments first (named as the test wrote them), then every check the
    campaign makes before it needs torch or a GPU (its messages name the command-line option)."""
    # pytest loads this plugin in every session: the rest of syncverify is imported when a test uses it
    from syncverify.validation import one_of
    from syncverify.kernels.config import KERNELS
    from syncverify.kernels.errors import StressConfigError
    from syncverify.stress.campaign import CampaignOptions
    from syncverify.testing import check_stress_options

    one_of("kernel", options["kernel"], KERNELS, error=StressConfigError)
    for name in ("world_size", "iterations", "seed"):
        value = options[name]
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise StressConfigError(f"{name}={value!r} must be a whole number")
    seconds = options["seconds"]
    if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, (int, float))
                                or not seconds > 0):
        raise StressConfigError(f"seconds={seconds!r} must be a positive number of seconds")
    unknown = sorted(set(options) - set(CampaignOptions.__dataclass_fields__))
    if unknown:
        raise StressConfigError(f"unknown argument(s) {', '.join(unknown)}; the fixture takes "
                                f"{', '.join(sorted(CampaignOptions.__dataclass_fields__))}")
    try:
        check_stress_options(**options)
    except SyncVerifyError as error:
        raise SyncVerifyError(f"{error} (protocol={options['protocol']!r}, kernel={options['kernel']!r}, "
                          f"world_size={options['world_size']})") from None


def _skip_unless_runnable(interpret: bool) -> None:
    """Skip, naming what is missing and the flag that would change it."""
    try:
        # torch, triton: only a campaign needs them; without them the fixture skips
        import torch
        import triton  # noqa: F401
    except ImportError as error:
        pytest.skip(f"syncverify_stress needs torch and triton ({error}); "
                    "install them with: pip install 'syncverify[gpu]' (in a checkout: python -m pip install -e '.[gpu]')")
    if not interpret and not torch.cuda.is_available():
        pytest.skip("syncverify_stress needs a CUDA GPU and none is visible; pass "
                    "--syncverify-interpret to run the kernels through Triton's interpreter on the CPU")
