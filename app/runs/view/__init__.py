"""What the viewer asks of the core for a volume beyond the shown slice: the whole-volume count under a 2D model
(each class's mL and the label volume the three-plane view shows), and a 3D model's result run once and kept for
display (each slice's picture, the legend and the lesion list made from it). Qt-free; only the viewer's workers call
it. The volume's image read a few slices at a time is app.io.stack, which the folder run's 3D read uses too."""
