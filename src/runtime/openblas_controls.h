// OpenBLAS's own thread controls and build description, declared weak so a
// build against another BLAS still links (each pointer is then null: test
// it before calling). The runtime and the trainer set OpenBLAS's threads.
#pragma once

extern "C" {
void openblas_set_num_threads(int num_threads) __attribute__((weak));
int openblas_get_num_threads(void) __attribute__((weak));
char* openblas_get_corename(void) __attribute__((weak));
char* openblas_get_config(void) __attribute__((weak));
}
