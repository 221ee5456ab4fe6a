"""The CUDA backend: kernel descriptions rendered as CUDA C, run through CuPy on a GPU, or as host C++
(each block's threads as real threads) where there is none."""
