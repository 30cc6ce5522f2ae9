// Write the operands of one case of an fpspec GEMM set as two plain operand v1 files (docs/operands.rst),
// as a C++ team writes its own E2M1 codes and block scales; fpspec gemm / dequantize read them:
//   plain_operands SET.npz CASE SCHEME PROFILE SCALE_FORMAT OUT   ->  OUT-a.npz, OUT-bt.npz
// SCHEME PROFILE SCALE_FORMAT: the set's "operand" (its __meta__), e.g. ue5m3 exact ue5m3; PROFILE - for none
// (scheme codes: an instruction set's operands).  T is left at the profile's default (448).
#include <iostream>

#include "npz_min.hpp"

static Array text(const std::string& s) { return {"|u1", {s.size()}, s}; }  // a name as ASCII bytes

int main(int argc, char** argv) {
    if (argc != 7) return std::cerr << "usage: plain_operands SET.npz CASE SCHEME PROFILE SCALE_FORMAT OUT\n", 2;
    auto set = read_npz(argv[1]);
    size_t c = std::stoul(argv[2]);
    for (std::string side : {"a", "bt"}) {
        const Array &codes = set.at("in_" + side + "_codes"), &scales = set.at("in_" + side + "_scales");
        size_t m = codes.shape[1], k = codes.shape[2], sm = scales.shape[1], sk = scales.shape[2];
        std::map<std::string, Array> op{
            {"format", text("fpspec-plain-operand-v1")}, {"scheme", text(argv[3])}, {"scale_format", text(argv[5])},
            {"block", {"<i4", {1}, le(k / sk, 4)}}, {"tile", text(sm == m ? "1xB" : "BxB")},
            {"codes", {"|u1", {m, k}, codes.data.substr(c * m * k, m * k)}},  // one E2M1 code per byte
            {"scales", {"|u1", {sm, sk}, scales.data.substr(c * sm * sk, sm * sk)}}};  // row-major blocks
        if (std::string(argv[4]) != "-") op["profile"] = text(argv[4]);
        for (std::string s : {"amax", "encode_scale", "decode_scale"})  // float32 bits (uint32), one per case
            if (set.count("in_" + side + "_" + s))
                op[s] = {"<u4", {1}, set.at("in_" + side + "_" + s).data.substr(4 * c, 4)};
        write_npz(std::string(argv[6]) + "-" + side + ".npz", op);
    }
    return 0;
}
