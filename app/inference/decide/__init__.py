"""What a result means: verdict rules and their band, tuning from kept scores, agreement metrics and 3D lesions."""
