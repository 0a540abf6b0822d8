"""A user's own personalization data (`custom`), in one generic layout (docs/custom-data-layout.md).

  benchmark.py  the registered benchmark: load (with IBA's release loader), sample, stats
  rows.py       row-by-row checks of the layout, mapped onto the payload/gold shapes the judges read
  answers.py    the task format: IBA-Bench's for free text and API calls, APeB's for rankings
  judges.py     IBA's checkpoint and slot judges and APeB's ranking judge, bound to `custom`
"""
