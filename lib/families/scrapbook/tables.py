"""Stage 06's score tables of Scrapbook's protocol (the family's ``SCORE_TABLES``): ``levels.csv``
(accuracy per validation level, concept and form) and ``errors.csv`` (overall and the error
categories), from which the paper's Tables 8-15 are made; their names and columns."""

LEVELS, ERRORS = "levels", "errors"
LEVEL_COLUMNS = [
    "dataset",
    "style",
    "model",
    "level",
    "concepts",
    "concept",
    "type",
    "subgroup",
    "form",
    "n",
    "correct",
    "accuracy",
    "passed",
]
ERROR_COLUMNS = [
    "dataset",
    "style",
    "model",
    "filter",
    "unit",
    "category",
    "count",
    "share",
    "correct",
    "accuracy",
]
