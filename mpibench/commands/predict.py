HELP = "todo"
SESSION = "offline"


def add_arguments(p):
    pass


def execute(session, args):
    return 0
