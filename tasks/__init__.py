"""Task sets: the WebGym format, rubrics, decomposition, the out-of-distribution split."""
