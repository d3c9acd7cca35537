"""Shared fixtures and markers.

``ctx``: a SynthesisContext for the target under test (``--target`` or ``MORELLO_TEST_TARGET``,
default zen1). Markers:

* ``runs_code(*features)``: the test compiles and runs code for the target under test (which
  needs ``features``, named as the target's /proc/cpuinfo field names them; default: all the
  target's ``isa``). Skipped where this machine cannot run it (another architecture and no
  emulator, a CPU without the features, no cross compiler), with the reason; failed instead
  when ``MORELLO_REQUIRE_ISA=1``, so CI cannot silently test nothing.
* ``times_code``: the test times code for the target under test (``bench``, peers, the
  machine's limits), which is meaningful only where the code runs natively; skipped where it
  would run under an emulator, whatever ``MORELLO_REQUIRE_ISA`` says (``bench`` refuses that),
  and otherwise treated as ``runs_code``.
* ``target(*names)``: the test is written for these targets' kernels or programs (it names
  them); skipped when another target is under test.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

from morello.codegen import runner
from morello.codegen.runner import cannot_run
from morello.context import SynthesisContext, make_context
from morello.plugins import Plugins
from morello.target import Target

settings.register_profile("dev", max_examples=30, deadline=None)
settings.register_profile(
    "ci", max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("nightly", max_examples=10_000, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--target", default=None, help="target to test (default: zen1)")
    parser.addoption(
        "--update-golden", action="store_true", help="rewrite golden C files instead of comparing"
    )


@pytest.fixture(autouse=True, scope="session")
def _private_cache_folder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Point the default memo table (and anything else cached), and the configuration folder
    (a calibration of this machine, which would change costs), away from the user's files.

    Set in the environment, so subprocesses started by tests inherit it.
    """
    folders = {"XDG_CACHE_HOME": "cache", "XDG_CONFIG_HOME": "config"}
    old = {var: os.environ.get(var) for var in folders}
    for var, name in folders.items():
        os.environ[var] = str(tmp_path_factory.mktemp(name))
    yield
    for var, value in old.items():
        if value is None:
            os.environ.pop(var, None)
        else:
            os.environ[var] = value


@pytest.fixture(scope="session")
def target_name(request: pytest.FixtureRequest) -> str:
    return _target_under_test(request.config)


@pytest.fixture(scope="session")
def ctx(target_name: str) -> SynthesisContext:
    return make_context(target_name)


def _target_under_test(config: pytest.Config) -> str:
    return config.getoption("--target") or os.environ.get("MORELLO_TEST_TARGET", "zen1")


@functools.cache
def _target(name: str) -> Target:
    return Plugins().target(name)


def pytest_runtest_setup(item: pytest.Item) -> None:
    name = _target_under_test(item.config)
    only = item.get_closest_marker("target")
    if only is not None and name not in only.args:
        pytest.skip(f"written for target {', '.join(only.args)}; the target under test is {name}")
    target = _target(name)
    if item.get_closest_marker("times_code") is not None and not runner.native_arch(target):
        pytest.skip(
            f"times code, and target {name}'s code runs on {target.platform.arch}, "
            f"not natively on this {runner.host_arch()} machine"
        )
    marker = item.get_closest_marker("runs_code")
    if marker is None and item.get_closest_marker("times_code") is None:
        return
    features = marker.args if marker is not None else ()
    why = cannot_run(target, features or target.isa)
    if why:
        if os.environ.get("MORELLO_REQUIRE_ISA") == "1":
            pytest.fail(f"{why} and MORELLO_REQUIRE_ISA=1")
        pytest.skip(why)
