"""A 3D model on a whole volume: orientation, resampling, normalisation, the sliding window, activation, and the memory
said before it is allocated."""
