from splitplan._entry import run

run()
