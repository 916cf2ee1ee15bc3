from splitplan.cli import run

run()
