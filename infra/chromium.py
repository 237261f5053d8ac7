"""How Playwright launches the Chromium that the settings name (Debian's, by default)."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path
from typing import Any

from infra.cpu_group import group_for
from infra.settings import Settings, feature_list

# Headless on a machine with no display and no outside network: without the background-networking
# flags Chromium keeps dialling update and sync services and floods the log with refusals.
CHROMIUM_ARGS = (
    "--headless=new",
    "--no-sandbox",  # workers often run as root in containers, where the sandbox cannot start
    "--disable-gpu",
    "--disable-dev-shm-usage",  # small /dev/shm in containers crashes renderers
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    # A wheel scrolls at once, not in an animation a screenshot may catch half-way: the page an
    # observation shows is the page a rebuild from the log shows again.
    "--disable-smooth-scrolling",
)


class ChromiumMissing(RuntimeError):
    """The configured Chromium executable does not exist or does not run."""


def launch_options(settings: Settings, extra_args: list[str] | None = None) -> dict[str, Any]:
    """Keyword arguments for ``playwright.chromium.launch``: webgym's flags, then the settings'
    ``chromium_args``, then ``extra_args``. Where these name a feature list
    (``--disable-features``, ``--enable-features``), Chromium is started through
    :func:`launcher`'s script, which joins every occurrence of each list into one, Playwright's
    own included: Chromium itself keeps only the last."""
    if not settings.chromium_path.exists():
        raise ChromiumMissing(
            f"Chromium not found at {settings.chromium_path}. Install Debian's build with "
            "`apt-get install chromium`, or set WEBGYM_CHROMIUM_PATH to a Chromium executable."
        )
    args = [*CHROMIUM_ARGS, *shlex.split(settings.chromium_args), *(extra_args or [])]
    merge = any(feature_list(arg) is not None for arg in args)
    return {
        "executable_path": str(launcher(settings, merge_features=merge)),
        "headless": True,
        "args": args,
    }


# Rebuilds "$@" with each feature list's values joined into one switch at the end (POSIX sh:
# the loop's word list is expanded once, so shifting and appending in it is safe).
_MERGE_FEATURES = """\
for arg in "$@"; do
  shift
  case "$arg" in
    --disable-features=*) off="${off:+$off,}${arg#--disable-features=}" ;;
    --enable-features=*) on="${on:+$on,}${arg#--enable-features=}" ;;
    *) set -- "$@" "$arg" ;;
  esac
done
if [ -n "$off" ]; then set -- "$@" "--disable-features=$off"; fi
if [ -n "$on" ]; then set -- "$@" "--enable-features=$on"; fi"""


def launcher(settings: Settings, merge_features: bool = False) -> Path:
    """The executable Playwright starts: the configured Chromium itself or, with
    ``browser_nice`` above 0, a browsers' cgroup (:func:`infra.cpu_group.group_for`: the
    ``browser_cpu_weight`` set, or by default a weight where a group can be made; made or
    re-weighted here) or ``merge_features``, a script in the cache dir. The script puts itself
    in that group, rewrites the arguments so that each feature list appears once, holding every
    occurrence's features, and execs Chromium under ``nice``: the browser and every process it
    forks (zygotes, renderers, GPU) run at that niceness, in that group. The script is
    rewritten atomically when missing or different, so workers sharing a cache dir never see
    half of one. Raises CpuGroupUnavailable when a weight is set and no cgroup can be made."""
    nice = settings.browser_nice
    group = group_for(settings.browser_cpu_weight)
    if nice == 0 and group is None and not merge_features:
        return settings.chromium_path
    lines = [
        "#!/bin/sh",
        "# Written by webgym (WEBGYM_BROWSER_NICE, WEBGYM_BROWSER_CPU_WEIGHT, feature lists).",
    ]
    if group is not None:
        procs = shlex.quote(str(group.procs))
        refused = "{ echo 'webgym: cannot join the browsers cgroup' >&2; exit 1; }"
        lines.append(f"echo $$ > {procs} || {refused}")
    if merge_features:
        lines.append(_MERGE_FEATURES)
    runs = f"nice -n {nice} " if nice else ""
    lines.append(f'exec {runs}{shlex.quote(str(settings.chromium_path))} "$@"')
    text = "\n".join(lines) + "\n"
    # The script names the group, not its weight: the weight is the group's, set above.
    name = f"chromium-nice-{nice}" + (f"-in-{group.path.name}" if group is not None else "")
    name += "-merging-features" if merge_features else ""
    script = settings.cache_dir / "chromium" / name
    if not script.exists() or script.read_text() != text:
        script.parent.mkdir(parents=True, exist_ok=True)
        staged = script.with_name(f"{script.name}.{os.getpid()}")
        staged.write_text(text)
        staged.chmod(0o755)
        staged.replace(script)
    return script


def browsers_weighed(settings: Settings) -> str:
    """How the browsers weigh against the other processes (``webgym status``): their cgroup and
    its weight, their niceness, or that they run as any process."""
    group = group_for(settings.browser_cpu_weight)
    parts = [f"cgroup {group.path}, {group.weight_file.name} {group.weight}"] if group else []
    if settings.browser_nice:
        parts.append(f"niceness {settings.browser_nice}")
    return "; ".join(parts) or "no CPU group or niceness (WEBGYM_BROWSER_CPU_WEIGHT)"


def chromium_version(settings: Settings) -> str:
    """``Chromium 156.0...`` as the executable reports it."""
    launch_options(settings)  # raises ChromiumMissing with the fix
    result = subprocess.run(
        [str(settings.chromium_path), "--version"], capture_output=True, text=True, timeout=30
    )
    if result.returncode != 0:
        raise ChromiumMissing(
            f"{settings.chromium_path} --version failed: {result.stderr.strip()[-500:]}"
        )
    return result.stdout.strip()
