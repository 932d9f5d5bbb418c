"""Window presets (center, width) in Hounsfield units, as clinical viewers name them. No imports: the viewer's
menus read them before numpy is loaded."""

CT_PRESETS: dict[str, tuple[float, float]] = {
    "Soft tissue": (40.0, 400.0),
    "Lung": (-600.0, 1500.0),
    "Bone": (300.0, 1500.0),
    "Brain": (40.0, 80.0),
    "Liver": (60.0, 160.0),
    "Mediastinum": (50.0, 350.0),
}
