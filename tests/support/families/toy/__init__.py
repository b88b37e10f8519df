"""A family of work as a newcomer adds one: this folder and nothing else (tests/test_toy_task.py puts
it beside lib/families/ and the registry finds it)."""

from lib.families.toy.task import Colour

TASKS = (Colour(),)
