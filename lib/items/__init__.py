"""Item quality: the item bank and the audits over it - which of a benchmark's items are good.

- :mod:`lib.items.bank` - every answer of every model, style and run pooled per item (dataset,
  digest, id) in one Parquet file, with people's verdicts where there are any; appended by run,
  rebuilt on demand.
- :mod:`lib.items.classical` - per item: share correct, corrected point-biserial discrimination,
  the most common wrong answer; flags (saturated, never right, negative discrimination, a wrong
  answer the respondents agree on).
- :mod:`lib.items.irt` - a two-parameter logistic fit (difficulty, discrimination, their standard
  errors) where enough respondents answered.
- :mod:`lib.items.subsets` - a tenth of the items that estimates every respondent's accuracy,
  checked by leaving each respondent out.
- :mod:`lib.items.text_features` - the text-only reader's features (n-grams, surface tells) and
  its folds grouped by image.
- :mod:`lib.items.blind` - blind solvability: each item's probability of the right answer from
  its text alone (a linear reader cross-fitted by image, or the project's text LLM), and blind
  accuracy beside chance and the rule-based tells.
- :mod:`lib.items.leaks` - near copies of images within and across datasets (resized, recompressed,
  mirrored, cropped, recoloured) and the questions repeated on them.
- :mod:`lib.items.finding` - what one audit found (per item, per dataset version, tables, figures).
- :mod:`lib.items.audits` - the audits that read the items themselves: the blind reader
  (``blind_solvable``) and image leaks (``leaked_image``, ``repeated_question``).
- :mod:`lib.items.quality` - stage 07's item quality: the bank of a run, every audit of
  ``AUDITS`` over it, the tables and summary.
- :mod:`lib.items.figures`, :mod:`lib.items.cards` - the distribution figures and the dataset
  cards.

``python -m lib.items`` builds a bank from runs and reports on it.
"""
