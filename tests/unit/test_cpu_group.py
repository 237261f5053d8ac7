"""The browsers' cgroup, on fake cgroup trees: v2 where it has a cpu controller, else v1."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from infra import cpu_group
from infra.chromium import browsers_weighed, launcher
from infra.cpu_group import AUTO_WEIGHT, CpuGroupUnavailable, browsers_group, group_for, v1_shares
from infra.settings import Settings


def _v1_tree(root: Path) -> Path:
    (root / "cpu").mkdir(parents=True)
    (root / "cpu" / "cpu.shares").write_text("1024\n")
    return root


def _v2_tree(root: Path, controllers: str = "cpuset cpu io memory pids") -> Path:
    root.mkdir(parents=True)
    (root / "cgroup.controllers").write_text(controllers + "\n")
    (root / "cgroup.subtree_control").write_text("memory\n")
    return root


def _fake_kernel_files(group: Path, name: str, value: str) -> None:
    """What the kernel creates in a new group (a fake tree has to write them itself)."""
    group.mkdir(exist_ok=True)
    (group / name).write_text(value)
    (group / "cgroup.procs").write_text("")


def test_v1_scales_the_weight_to_shares_and_a_second_call_changes_nothing(tmp_path: Path):
    root = _v1_tree(tmp_path / "cg")
    _fake_kernel_files(root / "cpu" / "webgym-browsers", "cpu.shares", "1024\n")
    group = browsers_group(10, root)
    assert (group.version, group.weight) == (1, 102)
    assert (root / "cpu" / "webgym-browsers" / "cpu.shares").read_text() == "102"
    assert group.procs == root / "cpu" / "webgym-browsers" / "cgroup.procs"
    assert browsers_group(10, root) == group  # the tenth run like the first
    assert browsers_group(100, root).weight == 1024  # re-weighted when the setting changes


def test_v2_enables_the_controller_and_writes_the_weight_as_given(tmp_path: Path):
    root = _v2_tree(tmp_path / "cg")
    _fake_kernel_files(root / "webgym-browsers", "cpu.weight", "100\n")
    group = browsers_group(25, root)
    assert (group.version, group.weight) == (2, 25)
    assert (root / "webgym-browsers" / "cpu.weight").read_text() == "25"
    assert (root / "cgroup.subtree_control").read_text() == "+cpu"


def test_v2_without_a_cpu_controller_falls_back_to_v1(tmp_path: Path):
    root = _v1_tree(_v2_tree(tmp_path / "cg", controllers="memory pids"))
    _fake_kernel_files(root / "cpu" / "webgym-browsers", "cpu.shares", "1024\n")
    assert browsers_group(50, root).version == 1


def test_no_writable_cpu_controller_says_what_to_do(tmp_path: Path):
    root = _v2_tree(tmp_path / "cg", controllers="memory")
    with pytest.raises(CpuGroupUnavailable, match="WEBGYM_BROWSER_NICE") as raised:
        browsers_group(10, root)
    assert "no cpu controller" in str(raised.value) and "cpu.shares" in str(raised.value)


def test_v1_shares_keep_the_kernel_minimum():
    assert [v1_shares(w) for w in (1, 10, 100, 10000)] == [10, 102, 1024, 102400]
    assert v1_shares(0) == 2
    with pytest.raises(ValueError):
        browsers_group(0)


def test_the_wrapper_joins_the_group_before_it_execs_chromium(tmp_path: Path, monkeypatch):
    root = _v1_tree(tmp_path / "cg")
    _fake_kernel_files(root / "cpu" / "webgym-browsers", "cpu.shares", "1024\n")
    monkeypatch.setattr(cpu_group, "CGROUP_ROOT", root)
    fake = tmp_path / "chromium"
    fake.write_text('#!/bin/sh\necho "ran $*"\n')
    fake.chmod(0o755)
    settings = Settings(chromium_path=fake, cache_dir=tmp_path / "cache", browser_cpu_weight=30)
    wrapper = launcher(settings)
    assert wrapper.name == "chromium-nice-0-in-webgym-browsers"
    ran = subprocess.run([wrapper, "--headless=new"], capture_output=True, text=True, check=True)
    procs = (root / "cpu" / "webgym-browsers" / "cgroup.procs").read_text().split()
    assert ran.stdout.strip() == "ran --headless=new" and len(procs) == 1 and int(procs[0]) > 0


def test_an_unset_weight_is_the_automatic_one_where_a_group_can_be_made(tmp_path: Path):
    root = _v2_tree(tmp_path / "cg")
    _fake_kernel_files(root / "webgym-browsers", "cpu.weight", "100\n")
    group = group_for(None, root)
    assert group is not None and (group.version, group.weight) == (2, AUTO_WEIGHT)
    assert (root / "webgym-browsers" / "cpu.weight").read_text() == str(AUTO_WEIGHT)


def test_an_unset_weight_without_the_rights_runs_the_browsers_as_they_are(tmp_path, caplog):
    root = _v2_tree(tmp_path / "cg", controllers="memory")
    with caplog.at_level("INFO", logger="infra.cpu_group"):
        assert group_for(None, root) is None
    assert "without a CPU weight" in caplog.text and "no cpu controller" in caplog.text


def test_a_weight_set_is_required_and_zero_is_no_group(tmp_path: Path):
    root = _v2_tree(tmp_path / "cg", controllers="memory")
    assert group_for(0, root) is None
    with pytest.raises(CpuGroupUnavailable, match="WEBGYM_BROWSER_CPU_WEIGHT=10"):
        group_for(10, root)


def test_the_wrapper_joins_the_automatic_group_when_the_weight_is_unset(tmp_path, monkeypatch):
    root = _v1_tree(tmp_path / "cg")
    _fake_kernel_files(root / "cpu" / "webgym-browsers", "cpu.shares", "1024\n")
    monkeypatch.setattr(cpu_group, "CGROUP_ROOT", root)
    settings = Settings(chromium_path=Path("/usr/bin/true"), cache_dir=tmp_path / "cache")
    assert settings.browser_cpu_weight is None
    assert launcher(settings).name == "chromium-nice-0-in-webgym-browsers"
    shares = (root / "cpu" / "webgym-browsers" / "cpu.shares").read_text()
    assert shares == str(v1_shares(AUTO_WEIGHT))


def test_status_says_how_the_browsers_are_weighed(tmp_path: Path, monkeypatch):
    root = _v2_tree(tmp_path / "cg")
    _fake_kernel_files(root / "webgym-browsers", "cpu.weight", "100\n")
    monkeypatch.setattr(cpu_group, "CGROUP_ROOT", root)
    told = browsers_weighed(Settings(browser_nice=3))
    assert told == f"cgroup {root / 'webgym-browsers'}, cpu.weight {AUTO_WEIGHT}; niceness 3"
    assert "no CPU group" in browsers_weighed(Settings(browser_cpu_weight=0))
