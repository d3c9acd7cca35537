"""Shared fixtures and markers.

``ctx``: a SynthesisContext for the target under test (``--target`` or ``MORELLO_TEST_TARGET``,
default zen1). ``requires_isa(*flags)`` skips on CPUs without the flags (named as in
/proc/cpuinfo), or fails when ``MORELLO_REQUIRE_ISA=1`` so CI cannot silently test nothing.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

from morello.codegen.harness import missing_isa
from morello.context import SynthesisContext, make_context

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
    """Point the default memo table (and anything else cached) away from the user's files.

    Set in the environment, so subprocesses started by tests inherit it.
    """
    old = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("cache"))
    yield
    if old is None:
        os.environ.pop("XDG_CACHE_HOME", None)
    else:
        os.environ["XDG_CACHE_HOME"] = old


@pytest.fixture(scope="session")
def target_name(request: pytest.FixtureRequest) -> str:
    return request.config.getoption("--target") or os.environ.get("MORELLO_TEST_TARGET", "zen1")


@pytest.fixture(scope="session")
def ctx(target_name: str) -> SynthesisContext:
    return make_context(target_name)


def pytest_runtest_setup(item: pytest.Item) -> None:
    marker = item.get_closest_marker("requires_isa")
    if marker is None:
        return
    lacking = missing_isa(marker.args)
    if lacking:
        reason = f"CPU lacks {', '.join(lacking)}"
        if os.environ.get("MORELLO_REQUIRE_ISA") == "1":
            pytest.fail(f"{reason} and MORELLO_REQUIRE_ISA=1")
        pytest.skip(reason)
