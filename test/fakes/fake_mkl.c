/*===- fake_mkl.c - a stand-in for oneMKL's libmkl_rt in tests ----------===//
//
// test/e2e/dsc-blas.test puts this library where DSC_BLAS looks for oneMKL
// ($VIRTUAL_ENV/lib/libmkl_rt.so.3) to see which CPUs take it by default
// and that dsrun sets oneMKL's layers before its first product, without
// the 1 GB wheel. Each entry point dsrun calls appends a line to the file
// named by DSC_FAKE_MKL_LOG; cblas_sgemm is the plain row-major product.
//
//===----------------------------------------------------------------------===*/

#include <stdio.h>
#include <stdlib.h>

static void note(const char *what, int value) {
  const char *path = getenv("DSC_FAKE_MKL_LOG");
  FILE *f = path ? fopen(path, "a") : NULL;
  if (!f)
    return;
  fprintf(f, "%s %d\n", what, value);
  fclose(f);
}

int MKL_Set_Threading_Layer(int code) {
  note("threading", code);
  return code;
}

int MKL_Set_Interface_Layer(int code) {
  note("interface", code);
  return code;
}

static int threads = 1;
void MKL_Set_Num_Threads(int n) { threads = n; }
int MKL_Get_Max_Threads(void) { return threads; }

enum { kRowMajor = 101, kTrans = 112 };

void cblas_sgemm(int order, int transA, int transB, int M, int N, int K,
                 float alpha, const float *A, int lda, const float *B, int ldb,
                 float beta, float *C, int ldc) {
  static int calls = 0;
  if (calls++ == 0)
    note("sgemm", order);
  if (order != kRowMajor)
    abort();
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      double sum = 0;
      for (int k = 0; k < K; ++k) {
        float a = transA == kTrans ? A[k * lda + i] : A[i * lda + k];
        float b = transB == kTrans ? B[j * ldb + k] : B[k * ldb + j];
        sum += (double)a * b;
      }
      float *c = &C[i * ldc + j];
      *c = (float)(alpha * sum + (beta == 0.0f ? 0.0 : (double)beta * *c));
    }
}
