"""``python -m fsm_stage`` runs the ``fsm-stage`` command line."""

from fsm_stage.cli import main

main()
