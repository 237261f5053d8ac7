"""The Chromium executable Playwright starts: the configured one, or a nice wrapper around it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from pydantic import ValidationError

from infra.chromium import launch_options, launcher
from infra.settings import Settings, feature_list


def _fake_chromium(tmp_path: Path) -> Path:
    """A stand-in that prints its niceness and its arguments, as the wrapper passes them."""
    fake = tmp_path / "my chromium"  # a space: the wrapper must quote the path
    fake.write_text('#!/bin/sh\necho "$(nice) $*"\n')
    fake.chmod(0o755)
    return fake


def test_without_a_niceness_or_a_group_playwright_starts_chromium_itself(tmp_path: Path):
    settings = Settings(
        chromium_path=_fake_chromium(tmp_path), cache_dir=tmp_path / "cache", browser_cpu_weight=0
    )
    assert launch_options(settings)["executable_path"] == str(settings.chromium_path)
    assert not (tmp_path / "cache").exists()


def test_a_niceness_wraps_chromium_and_passes_every_argument(tmp_path: Path):
    settings = Settings(
        chromium_path=_fake_chromium(tmp_path),
        cache_dir=tmp_path / "cache",
        browser_nice=7,
        browser_cpu_weight=0,
    )
    wrapper = Path(launch_options(settings)["executable_path"])
    assert wrapper.parent == tmp_path / "cache" / "chromium"
    ran = subprocess.run(
        [wrapper, "--headless=new", "a b"], capture_output=True, text=True, check=True
    )
    base = int(subprocess.run(["nice"], capture_output=True, text=True).stdout)
    assert ran.stdout.split() == [str(min(19, base + 7)), "--headless=new", "a", "b"]


def test_the_wrapper_follows_the_settings_and_leaves_nothing_half_written(tmp_path: Path):
    cache = tmp_path / "cache"
    first = Settings(
        chromium_path=_fake_chromium(tmp_path),
        cache_dir=cache,
        browser_nice=5,
        browser_cpu_weight=0,
    )
    path = launcher(first)
    assert launcher(first) == path  # the same settings: the same script, not rewritten
    moved = first.model_copy(update={"chromium_path": Path("/opt/other/chromium")})
    assert launcher(moved) == path and "/opt/other/chromium" in path.read_text()
    assert sorted(p.name for p in path.parent.iterdir()) == ["chromium-nice-5"]


def test_the_settings_flags_follow_webgyms_own_and_come_before_the_callers(
    tmp_path: Path, monkeypatch
):
    monkeypatch.setenv("WEBGYM_CHROMIUM_ARGS", "--js-flags='--no-memory-reducer --foo' --lang=de")
    settings = Settings(
        chromium_path=_fake_chromium(tmp_path), cache_dir=tmp_path / "cache", browser_cpu_weight=0
    )
    args = launch_options(settings, ["--caller"])["args"]
    assert args[-3:] == ["--js-flags=--no-memory-reducer --foo", "--lang=de", "--caller"]
    assert args[0] == "--headless=new"


def test_chromium_args_that_do_not_split_or_are_not_flags_are_refused_with_the_rule():
    with pytest.raises(ValidationError, match="cannot split"):
        Settings(chromium_args="--js-flags='--unclosed")
    with pytest.raises(ValidationError, match="'no-memory-reducer' is not a flag"):
        Settings(chromium_args="--js-flags no-memory-reducer")


def test_feature_lists_without_a_feature_are_refused_with_the_form_to_use():
    for flags in ["--disable-features", "--enable-features= --a", "--disable-features=,"]:
        with pytest.raises(ValidationError, match="names no feature: give the list"):
            Settings(chromium_args=flags)
    assert Settings(chromium_args="--disable-features=SpareRendererForSitePerProcess")


def test_a_feature_list_is_read_once_for_the_check_and_the_launch():
    assert feature_list("--disable-features=A,,B") == ("--disable-features", ["A", "B"])
    assert feature_list("--enable-features") == ("--enable-features", [])
    assert feature_list("--disable-features-x=A") is None
    assert feature_list("--js-flags=--disable-features=A") is None


def test_feature_lists_are_joined_with_playwrights_own_not_replaced(tmp_path: Path):
    # Chromium keeps the last --disable-features only: without the join, one from the settings
    # would turn HttpsUpgrades and the rest of the list Playwright passes before it back on.
    lister = tmp_path / "chromium"
    lister.write_text("#!/bin/sh\nprintf '%s\\n' \"$@\"\n")  # one argument a line
    lister.chmod(0o755)
    settings = Settings(
        chromium_path=lister,
        cache_dir=tmp_path / "cache",
        browser_cpu_weight=0,
        chromium_args="--disable-features=Spare --js-flags='--a --b'",
    )
    options = launch_options(settings, ["--enable-features=Mine"])
    wrapper = Path(options["executable_path"])
    assert wrapper.name == "chromium-nice-0-merging-features"
    playwright_first = ["--disable-features=HttpsUpgrades,PaintHolding", "--enable-features=Cdp"]
    ran = subprocess.run(
        [wrapper, *playwright_first, "--x=a b", *options["args"], "about:blank"],
        capture_output=True,
        text=True,
        check=True,
    )
    others = [a for a in options["args"] if "-features=" not in a]
    assert ran.stdout.splitlines() == [
        "--x=a b",
        *others,
        "about:blank",
        "--disable-features=HttpsUpgrades,PaintHolding,Spare",
        "--enable-features=Cdp,Mine",
    ]
