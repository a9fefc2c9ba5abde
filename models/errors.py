"""The one base of every error a user can cause and fix: a config value, the data, the model files, the
environment, a busy pipeline root, a bad request. Its message names the problem and the fix; the CLI prints
it and exits with code 2. Anything else that escapes is a bug and keeps its traceback."""


class UserError(Exception):
    """Something the user gave or the machine lacks, with the fix in the message."""
