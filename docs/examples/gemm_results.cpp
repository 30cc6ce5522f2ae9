// A stand-in kernel run on one fpspec GEMM set of E4M3 code operands, its outputs written as the results
// file fpspec check reads (docs/checker.rst): RESULTS/<set>.npz holding out_c, the FP32 bits of C.
//   gemm_results PACK/gemm-order-independent-e4m3.npz RESULTS   (then: fpspec check PACK RESULTS --select ...)
#include <cmath>
#include <cstring>
#include <iostream>

#include "npz_min.hpp"

static float e4m3(uint8_t c) {  // OCP E4M3 (fn): exponent bias 7, 3 mantissa bits, S.1111.111 NaN
    int e = c >> 3 & 15, m = c & 7;
    float v = (e == 15 && m == 7) ? NAN : e ? std::ldexp(1.0f + m / 8.0f, e - 7) : std::ldexp(m / 8.0f, -6);
    return c & 0x80 ? -v : v;
}

int main(int argc, char** argv) {
    if (argc != 3) return std::cerr << "usage: gemm_results SET.npz RESULTS_FOLDER\n", 2;
    auto set = read_npz(argv[1]);
    const Array &a = set.at("in_a"), &bt = set.at("in_bt");  // (cases, M, K) and (cases, N, K) codes
    size_t cases = a.shape[0], m = a.shape[1], k = a.shape[2], n = bt.shape[1];
    std::string c(cases * m * n * 4, '\0');
    for (size_t t = 0; t < cases; ++t)
        for (size_t i = 0; i < m; ++i)
            for (size_t j = 0; j < n; ++j) {
                float acc = 0;  // your kernel goes here; this set's outputs do not depend on the order
                for (size_t p = 0; p < k; ++p)
                    acc += e4m3(a.data[(t * m + i) * k + p]) * e4m3(bt.data[(t * n + j) * k + p]);
                std::memcpy(&c[((t * m + i) * n + j) * 4], &acc, 4);
            }
    std::string name = argv[1];  // RESULTS/<set>.npz: the set file's own name
    name = std::string(argv[2]) + "/" + name.substr(name.find_last_of('/') + 1);
    write_npz(name, {{"out_c", {"<u4", {cases, m, n}, c}}});
    return 0;
}
