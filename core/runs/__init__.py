"""The runs wing: a training run's whole life, from the Training page's Start to the run kept on the server.

The queue and its slots (shared by every worker through the runs folder), the run's own process and its entry,
what the run reports, the page's job (train, tune the threshold, keep), and the record of a kept run. It may
import the model and the release wings, because the page's job trains a model and tunes its suggestions.
"""
