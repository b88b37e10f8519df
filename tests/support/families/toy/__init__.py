"""A family of work as a newcomer adds one: this folder and nothing else (tests/test_toy_task.py puts
it beside lib/families/ and the registry finds it). It brings a task, a kind of image source for
stage 01 and the dataset it makes from the manifest, and stage 07's figure and paper rows."""

from lib.families.toy.stages import ToyAnalysis, ToySource, toy_dataset
from lib.families.toy.task import Colour

TASKS = (Colour(),)
SOURCES = {"toy": ToySource()}
MANIFEST_DATASETS = (toy_dataset,)
ANALYSIS = ToyAnalysis()
