"""``webgym sites``: serve and inspect the local practice web.

Registered by ``commands.main`` as ``app.add_typer(sites_app, name="sites")``.
"""

from __future__ import annotations

import threading

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from infra.ports import port_holder
from sites.data import generate_sites
from sites.server import PracticeWebServer
from tasks import miniwob

console = Console()
errors = Console(stderr=True)

sites_app = typer.Typer(
    help="The local practice web: generated websites (shopping, travel, news, government, "
    "recipes, jobs, real estate, events) with ground truth, for offline training and tests.",
    no_args_is_help=True,
    add_completion=False,
)

COUNT = typer.Option(50, min=1, help="how many sites to generate (domains cycle over 8)")
SEED = typer.Option(0, help="generator seed: the same seed and count give the same sites")


@sites_app.command()
def serve(
    port: int = typer.Option(8088, min=0, max=65535, help="port to listen on (0: any free)"),
    host: str = typer.Option("127.0.0.1", help="address to listen on"),
    count: int = COUNT,
    seed: int = SEED,
) -> None:
    """Serve every generated site from one port until Ctrl-C.

    Sites are told apart by the Host header: <site_id>.webgym.test.

    To browse them, start Chromium with the --host-resolver-rules value this prints, or use
    curl -H 'Host: <site_id>.webgym.test' http://127.0.0.1:<port>/.
    """
    sites = generate_sites(seed=seed, count=count)
    try:
        server = PracticeWebServer(
            sites, host=host, port=port, static_hosts={miniwob.HOST: miniwob.html_root()}
        )
    except OSError as exc:
        holder = port_holder(port)
        errors.print(
            f"[bold red]error:[/] cannot listen on {host}:{port} ({exc.strerror}"
            + (f"; held by {escape(holder)}" if holder else "")
            + "). Stop what uses the port or pick another with --port (0 picks a free one).",
            highlight=False,
            markup=True,
        )
        raise typer.Exit(1) from None
    with server:
        console.print(f"[green]serving {len(sites)} sites[/] on {host}:{server.port}")
        console.print(f'browse with: chromium --host-resolver-rules="{server.host_resolver_rules}"')
        for site in sites[:5]:
            console.print(f"  {server.base_url(site)}  ({site.domain}: {site.name})")
        example = sites[0].hostname
        console.print(f"or: curl -H 'Host: {example}' http://127.0.0.1:{server.port}/")
        console.print("stop with Ctrl-C")
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            console.print("stopping")


@sites_app.command("list")
def list_sites(count: int = COUNT, seed: int = SEED) -> None:
    """The generated sites: id, domain, brand name, number of items and theme."""
    table = Table("site_id", "domain", "name", "items", "theme")
    for site in generate_sites(seed=seed, count=count):
        table.add_row(
            site.site_id, site.domain, site.name, str(len(site.items)), site.theme.summary()
        )
    console.print(table)
