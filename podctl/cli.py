"""The podctl command line.

Exit codes: 0 success (or clean, or certified); 1 warnings under --strict, or
not certified; 2 usage or configuration error; 70 a bug in podctl. Errors the user can cause are
printed without a traceback; `-v` shows one.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from podctl import __version__
from podctl.cliopts import CommandGroup, site_argument, verbose_option
from podctl.core.errors import EXIT_ERRORS, EXIT_OK, EXIT_WARNINGS


def _console(stderr: bool = False):
    from podctl.core.console import make_console

    return make_console(stderr=stderr, soft_wrap=True)


class _Main(CommandGroup):
    # Subcommand groups that live in their own packages are imported only when used,
    # so that `podctl check` does not pay for the sim's or the deployer's imports.
    lazy_commands = {
        "sim": ("podctl.sim.cli", "sim"),
        "deploy": ("podctl.deploy.cli", "deploy"),
        "validate": ("podctl.validate.cli", "validate"),
        "fabric": ("podctl.ibfabric.cli", "fabric"),
        "nodes": ("podctl.operate.cli", "nodes"),
        "status": ("podctl.operate.cli", "status"),
    }

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *self.lazy_commands])

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in self.lazy_commands:
            import importlib

            module, attr = self.lazy_commands[name]
            return getattr(importlib.import_module(module), attr)
        return super().get_command(ctx, name)


@click.group(cls=_Main, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="podctl")
@verbose_option
def main() -> None:
    """Describe a GPU pod once, deploy it, and certify it with measurements."""


def _load(site_file: Path):
    from podctl.derive.site import load_site

    return load_site(site_file)


@main.command()
@site_argument
@click.option("--strict", is_flag=True, help="Exit 1 when there are warnings.")
@click.option(
    "--against",
    "old_site",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The site as it is cabled now: warn of each cable this site would move.",
)
@click.option("--output", "-o", "output", type=click.Choice(["text", "json"]), default="text", show_default=True)
def check(site_file: Path, strict: bool, old_site: Path | None, output: str) -> None:
    """Check a site file: every problem at once, with its YAML path and position."""
    from podctl.derive.site import check_site_file

    result = check_site_file(site_file)
    moved = _moved_cables(result.site, old_site) if old_site is not None and result.site is not None else []
    if output == "json":
        click.echo(
            json.dumps(
                {
                    "file": str(site_file),
                    "ok": not result.errors,
                    "diagnostics": [d.as_dict() for d in result.diagnostics],
                    "moved_cables": moved,
                },
                indent=2,
            )
        )
    else:
        for diag in result.diagnostics:
            click.echo(diag.render(), err=False)
        for line in moved:
            click.echo(f"{site_file}: warning: the change moves a cable that exists: {line}")
        summary = f"{len(result.errors)} error(s), {len(result.warnings) + len(moved)} warning(s)"
        if result.errors:
            click.echo(f"{site_file}: {summary}")
        else:
            site = result.site
            assert site is not None
            click.echo(f"{site_file}: ok ({len(site.nodes)} nodes, {len(site.groups)} groups); {summary}")
    if result.errors:
        sys.exit(EXIT_ERRORS)
    if strict and (result.warnings or moved):
        sys.exit(EXIT_WARNINGS)
    sys.exit(EXIT_OK)


def _moved_cables(site, old_site: Path) -> list[str]:  # type: ignore[no-untyped-def]
    """`check --against`: each cable of the site as cabled now that this site would move, in a line."""
    from podctl.ibfabric.schedule import describe

    return [f"{describe(old)}, to {new.label}" for old, new in _cable_changes(_load(old_site), site).moved]


@main.command()
@site_argument
@click.option(
    "--cables",
    is_flag=True,
    help="The cable schedule instead: one row per planned cable of every fabric (both ends, tier, speed, label).",
)
@click.option(
    "--against",
    "old_site",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The site as it is cabled now: list the cables this site adds, removes and moves.",
)
@click.option("--output", "-o", "output", type=click.Choice(["text", "json", "csv"]), default="text", show_default=True)
def plan(site_file: Path, cables: bool, old_site: Path | None, output: str) -> None:
    """Summarize what the site declares and what podctl derives from it."""
    from podctl.derive.plan import plan_summary, print_plan

    if output == "csv" and (not cables or old_site):
        raise click.UsageError("-o csv is the cable schedule's form: add --cables (without --against)")
    site = _load(site_file)
    if old_site is not None:
        changes = _cable_changes(_load(old_site), site)
        if output == "json":
            click.echo(json.dumps({"site": str(site_file), "against": str(old_site), **changes.as_dict()}, indent=2))
        else:
            _print_changes(changes)
        return
    if cables:
        _print_cables(site, output)
        return
    summary = plan_summary(site)
    if output == "json":
        click.echo(json.dumps(summary, indent=2, sort_keys=True))
    else:
        print_plan(summary, _console())


def _schedule(site):  # type: ignore[no-untyped-def]
    """Every fabric's cable schedule of `site`, and its fabrics' plans."""
    from podctl.derive.facts import Facts, hca_names
    from podctl.ibfabric.schedule import schedule

    plans = Facts(site).plans
    return [row for name, plan in plans.items() for row in schedule(plan, hca_names(site, name))], plans


def _cable_changes(old, new):  # type: ignore[no-untyped-def]
    from podctl.ibfabric.schedule import compare

    return compare(_schedule(old)[0], _schedule(new)[0])


def _print_changes(changes) -> None:  # type: ignore[no-untyped-def]
    from podctl.ibfabric.schedule import describe

    for what, rows in (("added", changes.added), ("removed", changes.removed)):
        for row in rows:
            click.echo(f"{what:<8} {describe(row)}")
    for old, new in changes.moved:
        click.echo(f"moved    {describe(old)}, to {new.label}")
    click.echo(
        f"{len(changes.added)} cable(s) added, {len(changes.removed)} removed, {len(changes.moved)} moved"
        + ("" if not changes.moved else ": a moved cable is re-cabled by hand on a running pod")
    )


def _print_cables(site, output: str) -> None:  # type: ignore[no-untyped-def]
    """`plan --cables`: the cable schedule of every fabric (podctl.ibfabric.schedule)."""
    from podctl.ibfabric.schedule import COLUMNS, as_csv, as_records

    rows, plans = _schedule(site)
    if output == "csv":
        click.echo(as_csv(rows), nl=False)
    elif output == "json":
        click.echo(json.dumps({"site": site.name, "cables": as_records(rows)}, indent=2))
    else:
        records = [["" if v is None else str(v) for v in r.values()] for r in as_records(rows)]
        widths = [max([len(c)] + [len(r[i]) for r in records]) for i, c in enumerate(COLUMNS)]
        for line in [list(COLUMNS), *records]:
            click.echo("  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip())
        click.echo(f"{len(rows)} cable(s) in {len(plans)} fabric(s)")


@main.command()
@site_argument
@click.option(
    "-o",
    "--output-dir",
    "out_dir",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Folder to write hosts.yml, group_vars/ and host_vars/ into.",
)
def inventory(site_file: Path, out_dir: Path) -> None:
    """Write the Ansible inventory with the facts the roles need."""
    from podctl.core import state
    from podctl.derive.inventory import write_inventory

    site = _load(site_file)
    files = write_inventory(site, out_dir, sim=state.sim_pod(site))
    click.echo(f"wrote {len(files)} files to {out_dir} ({len(site.nodes)} hosts)")


@main.command()
def schema() -> None:
    """Print the site file's JSON Schema (Draft 2020-12)."""
    from podctl.derive.site import schema as site_schema

    click.echo(json.dumps(site_schema(), indent=2))


@main.command()
@click.option("--profile", required=True, help="Reference architecture: dgx-a100, dgx-h100 or dgx-h200.")
@click.option("--scalable-units", "scalable_units", type=int, required=True, help="Number of scalable units.")
@click.option("--nodes", type=int, default=None, help="GPU nodes (default: every slot of every unit).")
@click.option("--name", default="pod", show_default=True, help="Pod name.")
@click.option(
    "-o",
    "--output",
    "out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="File to write (default: standard output).",
)
@click.option("--force", is_flag=True, help="Overwrite an existing file.")
@click.option(
    "--schema-ref",
    default=None,
    help="What the file's $schema line points at (default: the schema installed with podctl).",
)
def init(
    profile: str,
    scalable_units: int,
    nodes: int | None,
    name: str,
    out: Path | None,
    force: bool,
    schema_ref: str | None,
) -> None:
    """Write a complete, commented site file for a reference-architecture pod."""
    from importlib import resources

    from podctl.core.fsio import write_new_file
    from podctl.derive.init import render_site

    if schema_ref is None:
        schema_ref = str(resources.files("podctl.schema").joinpath("site.schema.json"))
    text = render_site(profile, scalable_units, nodes, name, schema_ref)
    if out is None:
        click.echo(text, nl=False)
        return
    write_new_file(out, text, overwrite=force)
    click.echo(f"wrote {out}; next: podctl check {out} && podctl plan {out}", err=True)


if __name__ == "__main__":  # pragma: no cover
    main()
