"""``python -m hexeract_scheduler.cli``: the ``hexeract`` command."""

from hexeract_scheduler.cli.commands import main

main(prog_name="hexeract")
