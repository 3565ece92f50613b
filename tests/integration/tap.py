"""The "ok - NAME" / "not ok - NAME" lines tests/run.sh counts, for the python checks the shell
tests run: check() prints one, exit_status() is 1 once any failed."""
_failed = False


def check(name, cond):
    global _failed
    print(('ok - ' if cond else 'not ok - ') + name)
    _failed = _failed or not cond


def exit_status():
    return 1 if _failed else 0
