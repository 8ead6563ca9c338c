// NEON instructions the Go assembler has no mnemonic for, as WORD
// encodings (Arm ARM, A64 Advanced SIMD). Arguments are register numbers
// in the Arm operand order: destination first (d), then n, m; i is a lane
// index. Each encoding was checked against GNU as (binutils
// aarch64-linux-gnu) for several register combinations.
//
// Mind the order: Go's own vector mnemonics (VADD, VTRN1, ...) take
// their operands reversed (sources first, destination last).

#define FADD_4S(d, n, m) WORD $(0x4E20D400 | (m)<<16 | (n)<<5 | (d)) // fadd vd.4s, vn.4s, vm.4s
#define FADD_2D(d, n, m) WORD $(0x4E60D400 | (m)<<16 | (n)<<5 | (d)) // fadd vd.2d, vn.2d, vm.2d
#define FSUB_4S(d, n, m) WORD $(0x4EA0D400 | (m)<<16 | (n)<<5 | (d)) // fsub vd.4s, vn.4s, vm.4s
#define FSUB_2D(d, n, m) WORD $(0x4EE0D400 | (m)<<16 | (n)<<5 | (d)) // fsub vd.2d, vn.2d, vm.2d
#define FMUL_4S(d, n, m) WORD $(0x6E20DC00 | (m)<<16 | (n)<<5 | (d)) // fmul vd.4s, vn.4s, vm.4s
#define FMUL_2D(d, n, m) WORD $(0x6E60DC00 | (m)<<16 | (n)<<5 | (d)) // fmul vd.2d, vn.2d, vm.2d
#define FDIV_4S(d, n, m) WORD $(0x6E20FC00 | (m)<<16 | (n)<<5 | (d)) // fdiv vd.4s, vn.4s, vm.4s
#define FDIV_2D(d, n, m) WORD $(0x6E60FC00 | (m)<<16 | (n)<<5 | (d)) // fdiv vd.2d, vn.2d, vm.2d
#define FMLA_4S(d, n, m) WORD $(0x4E20CC00 | (m)<<16 | (n)<<5 | (d)) // fmla vd.4s, vn.4s, vm.4s
#define FMLA_2D(d, n, m) WORD $(0x4E60CC00 | (m)<<16 | (n)<<5 | (d)) // fmla vd.2d, vn.2d, vm.2d
#define FMLS_4S(d, n, m) WORD $(0x4EA0CC00 | (m)<<16 | (n)<<5 | (d)) // fmls vd.4s, vn.4s, vm.4s
#define FMLS_2D(d, n, m) WORD $(0x4EE0CC00 | (m)<<16 | (n)<<5 | (d)) // fmls vd.2d, vn.2d, vm.2d
#define FADDP_4S(d, n, m) WORD $(0x6E20D400 | (m)<<16 | (n)<<5 | (d)) // faddp vd.4s, vn.4s, vm.4s
#define FMAX_4S(d, n, m) WORD $(0x4E20F400 | (m)<<16 | (n)<<5 | (d)) // fmax vd.4s, vn.4s, vm.4s
#define FCMEQ_4S(d, n, m) WORD $(0x4E20E400 | (m)<<16 | (n)<<5 | (d)) // fcmeq vd.4s, vn.4s, vm.4s
#define FCMEQ_2D(d, n, m) WORD $(0x4E60E400 | (m)<<16 | (n)<<5 | (d)) // fcmeq vd.2d, vn.2d, vm.2d
#define FCMGE_2D(d, n, m) WORD $(0x6E60E400 | (m)<<16 | (n)<<5 | (d)) // fcmge vd.2d, vn.2d, vm.2d
#define FCMGT_2D(d, n, m) WORD $(0x6EE0E400 | (m)<<16 | (n)<<5 | (d)) // fcmgt vd.2d, vn.2d, vm.2d
#define FCMGT_4S(d, n, m) WORD $(0x6EA0E400 | (m)<<16 | (n)<<5 | (d)) // fcmgt vd.4s, vn.4s, vm.4s
#define FACGT_2D(d, n, m) WORD $(0x6EE0EC00 | (m)<<16 | (n)<<5 | (d)) // facgt vd.2d, vn.2d, vm.2d
#define FACGT_4S(d, n, m) WORD $(0x6EA0EC00 | (m)<<16 | (n)<<5 | (d)) // facgt vd.4s, vn.4s, vm.4s
#define SDOT_4S(d, n, m) WORD $(0x4E809400 | (m)<<16 | (n)<<5 | (d)) // sdot vd.4s, vn.16b, vm.16b
#define SMAX_16B(d, n, m) WORD $(0x4E206400 | (m)<<16 | (n)<<5 | (d)) // smax vd.16b, vn.16b, vm.16b
#define SMAX_4S(d, n, m) WORD $(0x4EA06400 | (m)<<16 | (n)<<5 | (d)) // smax vd.4s, vn.4s, vm.4s
#define SMIN_4S(d, n, m) WORD $(0x4EA06C00 | (m)<<16 | (n)<<5 | (d)) // smin vd.4s, vn.4s, vm.4s
#define CMGT_2D(d, n, m) WORD $(0x4EE03400 | (m)<<16 | (n)<<5 | (d)) // cmgt vd.2d, vn.2d, vm.2d
#define CMGT_4S(d, n, m) WORD $(0x4EA03400 | (m)<<16 | (n)<<5 | (d)) // cmgt vd.4s, vn.4s, vm.4s
#define BIC_16B(d, n, m) WORD $(0x4E601C00 | (m)<<16 | (n)<<5 | (d)) // bic vd.16b, vn.16b, vm.16b
#define ADD_2D(d, n, m) WORD $(0x4EE08400 | (m)<<16 | (n)<<5 | (d)) // add vd.2d, vn.2d, vm.2d
#define ADD_4S(d, n, m) WORD $(0x4EA08400 | (m)<<16 | (n)<<5 | (d)) // add vd.4s, vn.4s, vm.4s
#define SUB_4S(d, n, m) WORD $(0x6EA08400 | (m)<<16 | (n)<<5 | (d)) // sub vd.4s, vn.4s, vm.4s
#define ORR_16B(d, n, m) WORD $(0x4EA01C00 | (m)<<16 | (n)<<5 | (d)) // orr vd.16b, vn.16b, vm.16b
#define AND_16B(d, n, m) WORD $(0x4E201C00 | (m)<<16 | (n)<<5 | (d)) // and vd.16b, vn.16b, vm.16b
#define UZP1_4S(d, n, m) WORD $(0x4E801800 | (m)<<16 | (n)<<5 | (d)) // uzp1 vd.4s, vn.4s, vm.4s
#define UZP2_4S(d, n, m) WORD $(0x4E805800 | (m)<<16 | (n)<<5 | (d)) // uzp2 vd.4s, vn.4s, vm.4s
#define TRN1_4S(d, n, m) WORD $(0x4E802800 | (m)<<16 | (n)<<5 | (d)) // trn1 vd.4s, vn.4s, vm.4s
#define TRN2_4S(d, n, m) WORD $(0x4E806800 | (m)<<16 | (n)<<5 | (d)) // trn2 vd.4s, vn.4s, vm.4s
#define TRN1_2D(d, n, m) WORD $(0x4EC02800 | (m)<<16 | (n)<<5 | (d)) // trn1 vd.2d, vn.2d, vm.2d
#define TRN2_2D(d, n, m) WORD $(0x4EC06800 | (m)<<16 | (n)<<5 | (d)) // trn2 vd.2d, vn.2d, vm.2d
#define ZIP1_8H(d, n, m) WORD $(0x4E403800 | (m)<<16 | (n)<<5 | (d)) // zip1 vd.8h, vn.8h, vm.8h
#define ZIP2_8H(d, n, m) WORD $(0x4E407800 | (m)<<16 | (n)<<5 | (d)) // zip2 vd.8h, vn.8h, vm.8h
#define FABS_4S(d, n) WORD $(0x4EA0F800 | (n)<<5 | (d)) // fabs vd.4s, vn.4s
#define FABS_2D(d, n) WORD $(0x4EE0F800 | (n)<<5 | (d)) // fabs vd.2d, vn.2d
#define FNEG_4S(d, n) WORD $(0x6EA0F800 | (n)<<5 | (d)) // fneg vd.4s, vn.4s
#define FCVTL_2D(d, n) WORD $(0x0E617800 | (n)<<5 | (d)) // fcvtl vd.2d, vn.2s
#define FCVTL2_2D(d, n) WORD $(0x4E617800 | (n)<<5 | (d)) // fcvtl2 vd.2d, vn.4s
#define FCVTL_4S(d, n) WORD $(0x0E217800 | (n)<<5 | (d)) // fcvtl vd.4s, vn.4h
#define FCVTL2_4S(d, n) WORD $(0x4E217800 | (n)<<5 | (d)) // fcvtl2 vd.4s, vn.8h
#define FCVTN_2S(d, n) WORD $(0x0E616800 | (n)<<5 | (d)) // fcvtn vd.2s, vn.2d
#define FCVTN2_4S(d, n) WORD $(0x4E616800 | (n)<<5 | (d)) // fcvtn2 vd.4s, vn.2d
#define FCVTNS_4S(d, n) WORD $(0x4E21A800 | (n)<<5 | (d)) // fcvtns vd.4s, vn.4s
#define FCVTNS_2D(d, n) WORD $(0x4E61A800 | (n)<<5 | (d)) // fcvtns vd.2d, vn.2d
#define SCVTF_4S(d, n) WORD $(0x4E21D800 | (n)<<5 | (d)) // scvtf vd.4s, vn.4s
#define SCVTF_2D(d, n) WORD $(0x4E61D800 | (n)<<5 | (d)) // scvtf vd.2d, vn.2d
#define UCVTF_4S(d, n) WORD $(0x6E21D800 | (n)<<5 | (d)) // ucvtf vd.4s, vn.4s
#define SQXTN_4H(d, n) WORD $(0x0E614800 | (n)<<5 | (d)) // sqxtn vd.4h, vn.4s
#define SQXTN2_8H(d, n) WORD $(0x4E614800 | (n)<<5 | (d)) // sqxtn2 vd.8h, vn.4s
#define SQXTN_8B(d, n) WORD $(0x0E214800 | (n)<<5 | (d)) // sqxtn vd.8b, vn.8h
#define SQXTN2_16B(d, n) WORD $(0x4E214800 | (n)<<5 | (d)) // sqxtn2 vd.16b, vn.8h
#define FMAXV_S(d, n) WORD $(0x6E30F800 | (n)<<5 | (d)) // fmaxv sd, vn.4s
#define FADDP_S(d, n) WORD $(0x7E30D800 | (n)<<5 | (d)) // faddp sd, vn.2s
#define SADDLV_H(d, n) WORD $(0x4E303800 | (n)<<5 | (d)) // saddlv hd, vn.16b
#define NEG_4S(d, n) WORD $(0x6EA0B800 | (n)<<5 | (d)) // neg vd.4s, vn.4s
#define SHLL_4S(d, n) WORD $(0x2E613800 | (n)<<5 | (d)) // shll vd.4s, vn.4h, #16
#define SHLL2_4S(d, n) WORD $(0x6E613800 | (n)<<5 | (d)) // shll2 vd.4s, vn.8h, #16
#define SXTL_8H(d, n) WORD $(0x0F08A400 | (n)<<5 | (d)) // sxtl vd.8h, vn.8b
#define SXTL2_8H(d, n) WORD $(0x4F08A400 | (n)<<5 | (d)) // sxtl2 vd.8h, vn.16b
#define SXTL_4S(d, n) WORD $(0x0F10A400 | (n)<<5 | (d)) // sxtl vd.4s, vn.4h
#define SXTL2_4S(d, n) WORD $(0x4F10A400 | (n)<<5 | (d)) // sxtl2 vd.4s, vn.8h
#define UXTL_8H(d, n) WORD $(0x2F08A400 | (n)<<5 | (d)) // uxtl vd.8h, vn.8b
#define UXTL2_8H(d, n) WORD $(0x6F08A400 | (n)<<5 | (d)) // uxtl2 vd.8h, vn.16b
#define UXTL_4S(d, n) WORD $(0x2F10A400 | (n)<<5 | (d)) // uxtl vd.4s, vn.4h
#define UXTL2_4S(d, n) WORD $(0x6F10A400 | (n)<<5 | (d)) // uxtl2 vd.4s, vn.8h
#define USHR_16B_4(d, n) WORD $(0x6F0C0400 | (n)<<5 | (d)) // ushr vd.16b, vn.16b, #4
#define SHL_2D_52(d, n) WORD $(0x4F745400 | (n)<<5 | (d)) // shl vd.2d, vn.2d, #52
#define SSHR_4S_31(d, n) WORD $(0x4F210400 | (n)<<5 | (d)) // sshr vd.4s, vn.4s, #31
#define SDOT_4S_E(d, n, m, i) WORD $(0x4F80E000 | ((i)&1)<<21 | ((i)>>1)<<11 | (m)<<16 | (n)<<5 | (d)) // sdot vd.4s, vn.16b, vm.4b[i]
#define FMUL_4S_E(d, n, m, i) WORD $(0x4F809000 | ((i)&1)<<21 | ((i)>>1)<<11 | (m)<<16 | (n)<<5 | (d)) // fmul vd.4s, vn.4s, vm.s[i]
#define FMLA_4S_E(d, n, m, i) WORD $(0x4F801000 | ((i)&1)<<21 | ((i)>>1)<<11 | (m)<<16 | (n)<<5 | (d)) // fmla vd.4s, vn.4s, vm.s[i]
#define DUP_4S_E(d, n, i) WORD $(0x4E040400 | (i)<<19 | (n)<<5 | (d)) // dup vd.4s, vn.s[i]
#define BIT_16B(d, n, m) WORD $(0x6EA01C00 | (m)<<16 | (n)<<5 | (d)) // bit vd.16b, vn.16b, vm.16b: d = m ? n : d, bit by bit
#define BSL_16B(d, n, m) WORD $(0x6E601C00 | (m)<<16 | (n)<<5 | (d)) // bsl vd.16b, vn.16b, vm.16b: d = d ? n : m, bit by bit
#define FMAX_2D(d, n, m) WORD $(0x4E60F400 | (m)<<16 | (n)<<5 | (d)) // fmax vd.2d, vn.2d, vm.2d
#define FCMGE_4S(d, n, m) WORD $(0x6E20E400 | (m)<<16 | (n)<<5 | (d)) // fcmge vd.4s, vn.4s, vm.4s
#define EOR_16B(d, n, m) WORD $(0x6E201C00 | (m)<<16 | (n)<<5 | (d)) // eor vd.16b, vn.16b, vm.16b
#define MOVV(d, n) ORR_16B(d, n, n) // mov vd.16b, vn.16b
#define MLA_4S(d, n, m) WORD $(0x4EA09400 | (m)<<16 | (n)<<5 | (d)) // mla vd.4s, vn.4s, vm.4s
#define SMLAL_4S_E(d, n, m, i) WORD $(0x0F402000 | ((i)>>2)<<11 | (((i)>>1)&1)<<21 | ((i)&1)<<20 | (m)<<16 | (n)<<5 | (d)) // smlal vd.4s, vn.4h, vm.h[i] (m < 16)
#define SMLAL2_4S_E(d, n, m, i) WORD $(0x4F402000 | ((i)>>2)<<11 | (((i)>>1)&1)<<21 | ((i)&1)<<20 | (m)<<16 | (n)<<5 | (d)) // smlal2 vd.4s, vn.8h, vm.h[i] (m < 16)
#define TBL_16B(d, n, m) WORD $(0x4E000000 | (m)<<16 | (n)<<5 | (d)) // tbl vd.16b, {vn.16b}, vm.16b
#define USHL_16B(d, n, m) WORD $(0x6E204400 | (m)<<16 | (n)<<5 | (d)) // ushl vd.16b, vn.16b, vm.16b
#define ZIP1_16B(d, n, m) WORD $(0x4E003800 | (m)<<16 | (n)<<5 | (d)) // zip1 vd.16b, vn.16b, vm.16b
#define ZIP2_16B(d, n, m) WORD $(0x4E007800 | (m)<<16 | (n)<<5 | (d)) // zip2 vd.16b, vn.16b, vm.16b
#define USHR_16B_2(d, n) WORD $(0x6F0E0400 | (n)<<5 | (d)) // ushr vd.16b, vn.16b, #2
#define SUB_16B(d, n, m) WORD $(0x6E208400 | (m)<<16 | (n)<<5 | (d)) // sub vd.16b, vn.16b, vm.16b
#define SHL_16B_4(d, n) WORD $(0x4F0C5400 | (n)<<5 | (d)) // shl vd.16b, vn.16b, #4
#define SHL_16B_2(d, n) WORD $(0x4F0A5400 | (n)<<5 | (d)) // shl vd.16b, vn.16b, #2
#define CMTST_16B(d, n, m) WORD $(0x4E208C00 | (m)<<16 | (n)<<5 | (d)) // cmtst vd.16b, vn.16b, vm.16b
#define SHL_16B_1(d, n) WORD $(0x4F095400 | (n)<<5 | (d)) // shl vd.16b, vn.16b, #1
#define SHL_16B_3(d, n) WORD $(0x4F0B5400 | (n)<<5 | (d)) // shl vd.16b, vn.16b, #3
#define SHL_16B_5(d, n) WORD $(0x4F0D5400 | (n)<<5 | (d)) // shl vd.16b, vn.16b, #5
#define SHL_16B_6(d, n) WORD $(0x4F0E5400 | (n)<<5 | (d)) // shl vd.16b, vn.16b, #6
#define SHL_16B_7(d, n) WORD $(0x4F0F5400 | (n)<<5 | (d)) // shl vd.16b, vn.16b, #7
#define SRI_16B_1(d, n) WORD $(0x6F0F4400 | (n)<<5 | (d)) // sri vd.16b, vn.16b, #1: d = d&0x80 | n>>1
#define SSHR_16B_5(d, n) WORD $(0x4F0B0400 | (n)<<5 | (d)) // sshr vd.16b, vn.16b, #5
#define NOT_16B(d, n) WORD $(0x6E205800 | (n)<<5 | (d)) // not vd.16b, vn.16b
