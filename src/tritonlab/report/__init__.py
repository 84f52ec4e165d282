"""Reports: the experiment log (markdown), summaries, plots and the project folder."""
