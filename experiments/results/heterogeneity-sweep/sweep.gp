set terminal pngcairo size 960,540 font 'DejaVu Sans,11'
set grid ytics
set key below horizontal
set output 'experiments/results/heterogeneity-sweep/sweep.png'
set title "heterogeneity-sweep: even / balanced makespan as the pi nodes slow down (n=3072)"
set xlabel 'CPU quota of each pi node (cores)'
set ylabel 'even makespan / balanced makespan'
set logscale x 2
set key inside left top
plot 'experiments/results/heterogeneity-sweep/sweep.dat' using 1:2 with linespoints dt 2 lw 2 title 'ideal (sum of speeds / (p x slowest))', '' using 1:3 with linespoints lw 2 title 'proportional', '' using 1:4 with linespoints lw 2 title 'model', '' using 1:5 with linespoints lw 2 title 'dynamic'
