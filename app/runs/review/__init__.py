"""Review and sign-off: the review log, the HTML review report and its rows, and the ground truth a picture is measured
against."""
