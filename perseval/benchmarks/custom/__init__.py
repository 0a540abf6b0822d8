"""A user's own personalization data (`custom`), in one generic layout (docs/custom-data-layout.md).

  card.py       what it reads, sends and scores, in one page
  benchmark.py  the registered benchmark: load and sample (benchmarks.release_folder), stats, analysis
  rows.py       row-by-row checks of the layout, mapped onto the payload/gold shapes the judges read
  answers.py    the request format: IBA-Bench's actions for free text and API calls, the ranking for rankings
  judges.py     the checkpoint, slot and ranking judges (benchmarks.action_judges, benchmarks.ranking_judge),
                registered for `custom`

Nothing here imports another benchmark: what it shares with IBA-Bench and APeB lives below them, in
perseval/benchmarks/ (release_folder, release_rows, actions, action_judges, rankings, ranking_judge).
"""
