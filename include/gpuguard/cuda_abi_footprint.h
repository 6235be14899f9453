/* gpuguard: the driver entry points that change what the driver holds for a
 * process without an allocation call (issue 22): context limits and module
 * and library loads, as an X-list GG_CU_FN(name, params) like
 * cuda_abi_funcs.h, kept apart because the simulator exports them from its
 * own list (tests/sim/sim_cuda_extra.h). tests/abi/cuda.c checks them
 * against cuda.h. No include guard: expanded once per includer's macro. */
GG_CU_FN(cuCtxSetLimit, (GGT(CUlimit) limit, size_t value))
GG_CU_FN(cuCtxGetLimit, (size_t * pvalue, GGT(CUlimit) limit))
GG_CU_FN(cuDeviceGetAttribute, (int *pi, GGT(CUdevice_attribute) attrib, GGT(CUdevice) dev))
GG_CU_FN(cuModuleLoad, (GGT(CUmodule) * module, const char *fname))
GG_CU_FN(cuModuleLoadData, (GGT(CUmodule) * module, const void *image))
GG_CU_FN(cuModuleLoadDataEx, (GGT(CUmodule) * module, const void *image, unsigned int numOptions,
                              GGT(CUjit_option) * options, void **optionValues))
GG_CU_FN(cuModuleGetFunction, (GGT(CUfunction) * hfunc, GGT(CUmodule) hmod, const char *name))
GG_CU_FN(cuLibraryGetKernel, (GGT(CUkernel) * pKernel, GGT(CUlibrary) library, const char *name))
GG_CU_FN(cuKernelGetFunction, (GGT(CUfunction) * pFunc, GGT(CUkernel) kernel))
GG_CU_FN(cuModuleLoadFatBinary, (GGT(CUmodule) * module, const void *fatCubin))
GG_CU_FN(cuLibraryLoadData, (GGT(CUlibrary) * library, const void *code, GGT(CUjit_option) * jitOptions,
                             void **jitOptionsValues, unsigned int numJitOptions, GGT(CUlibraryOption) * libraryOptions,
                             void **libraryOptionValues, unsigned int numLibraryOptions))
GG_CU_FN(cuLibraryLoadFromFile,
         (GGT(CUlibrary) * library, const char *fileName, GGT(CUjit_option) * jitOptions, void **jitOptionsValues,
          unsigned int numJitOptions, GGT(CUlibraryOption) * libraryOptions, void **libraryOptionValues,
          unsigned int numLibraryOptions))
