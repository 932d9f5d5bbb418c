"""Controllers: the QObjects that decide. Each owns one task of the window (what is shown, the reader's threshold,
editing a mask, reviewing, a volume's slices, Run on all): it takes the widgets' intents, asks the workers for
work, and sets the widgets from the results. A controller may import workers/, widgets/ and state/, never the shell
(app, main_window, actions, input_filters, toolbar, settings, recent, first_paint, window_parts) — the shell builds
and wires the controllers."""
