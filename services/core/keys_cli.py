"""`tombstone keys ...`: make the Ed25519 key pairs that sign PDLIs (docs/design.md §4.7)."""

from __future__ import annotations

from pathlib import Path

import click

from services.core.signing_keys import generate_key_pair, write_key_pair


@click.group()
def keys() -> None:
    """Signing keys: the marker signs PDLIs, the verifier trusts the public keys."""


@keys.command()
@click.option(
    "--out",
    "directory",
    type=click.Path(file_okay=False, path_type=Path),
    required=True,
    help="Directory for <name>.key (private, mode 0600) and <name>.pub.",
)
@click.option("--name", default=None, help="Key id and file name (default: the fingerprint).")
def generate(directory: Path, name: str | None) -> None:
    """Generate a key pair; print the variables that put it to use."""
    pair = generate_key_pair()
    try:
        private, public = write_key_pair(directory, pair, name)
    except (OSError, ValueError) as exc:
        raise click.ClickException(str(exc)) from exc
    key_id = name or pair.key_id
    click.echo(f"key id: {key_id}")
    click.echo(f"marker:   TOMBSTONE_MARKER_SIGNING_KEYS={key_id}={private}")
    click.echo(f"          TOMBSTONE_MARKER_SIGNING_KEY_ID={key_id}")
    click.echo(f"verifier: TOMBSTONE_VERIFIER_TRUSTED_KEYS={key_id}={public}")
