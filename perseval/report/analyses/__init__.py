"""The statistics the run record holds, computed from the stage outputs: baseline comparisons, controls (gains),
evidence attribution, cell statuses, differences between runs, and judges' agreement with human labels and reliability."""
